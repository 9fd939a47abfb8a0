"""Exceptions the CLI turns into one-line messages and exit codes."""


class ConfigError(ValueError):
    """Bad input found at start-up: config, flags, files, spaces (exit code 2)."""


class TrainingError(RuntimeError):
    """A failure during training: non-finite loss, an env that raises (exit code 1)."""


class ExportError(RuntimeError):
    """An export that failed: the exporter refused the policy, or the written file does not act as the
    policy does (exit code 1)."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ("" for none), for one-line errors."""
    text = str(exc)
    return text.splitlines()[0] if text else ""
