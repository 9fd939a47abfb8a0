"""Exceptions the CLI turns into one-line messages and exit codes."""


class ConfigError(ValueError):
    """Bad input found at start-up: config, flags, files, spaces (exit code 2)."""


class TrainingError(RuntimeError):
    """A failure during training: non-finite loss, an env that raises (exit code 1)."""


class ExportError(RuntimeError):
    """An export that failed: the exporter refused the policy, or the written file does not act as the
    policy does (exit code 1)."""


def first_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first line of an exception's message ("" for none), for one-line errors and warnings.

    With ``with_type``: ``Type: first line`` (the type's name alone for an empty message).
    """
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    if not with_type:
        return line
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__
