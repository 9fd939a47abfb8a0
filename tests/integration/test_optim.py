"""shell.optim.Adam against torch.optim.Adam: the same parameters, moments and state dicts."""

from __future__ import annotations

import copy
import sys

import pytest
import torch

from shell.optim import Adam


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _train(net: torch.nn.Module, opt, steps: int, lr_at=lambda k: 1e-2) -> None:
    gen = torch.Generator().manual_seed(1)
    for k in range(steps):
        x = torch.randn(16, 4, generator=gen)
        opt.zero_grad()
        net(x).square().mean().backward()
        if isinstance(opt, Adam):
            opt.lr = lr_at(k)
        else:
            opt.param_groups[0]["lr"] = lr_at(k)
        opt.step()


def test_matches_torch_adam_exactly() -> None:
    ours_net, ref_net = _net(0), _net(0)
    ours = Adam(ours_net.parameters(), lr=1e-2, eps=1e-5)
    ref = torch.optim.Adam(ref_net.parameters(), lr=1e-2, eps=1e-5, fused=True)
    _train(ours_net, ours, 25, lambda k: 1e-2 * (1 - k / 25))
    _train(ref_net, ref, 25, lambda k: 1e-2 * (1 - k / 25))
    for a, b in zip(ours_net.parameters(), ref_net.parameters(), strict=True):
        assert torch.equal(a, b)
    ours_state, ref_state = ours.state_dict(), ref.state_dict()
    assert ours_state["param_groups"] == ref_state["param_groups"]
    for i, st in ref_state["state"].items():
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(ours_state["state"][i][key], st[key]), (i, key)


@pytest.mark.parametrize("direction", ["torch_to_ours", "ours_to_torch"])
def test_state_dicts_load_into_each_other_and_continue_identically(direction) -> None:
    a_net, b_net = _net(0), _net(0)
    make_ours = lambda net: Adam(net.parameters(), lr=3e-3)  # noqa: E731
    make_ref = lambda net: torch.optim.Adam(net.parameters(), lr=3e-3, fused=True)  # noqa: E731
    src_make, dst_make = (make_ref, make_ours) if direction == "torch_to_ours" else (make_ours, make_ref)
    src = src_make(a_net)
    _train(a_net, src, 5)
    b_net.load_state_dict(a_net.state_dict())
    dst = dst_make(b_net)
    dst.load_state_dict(copy.deepcopy(src.state_dict()))  # as through a checkpoint file
    _train(a_net, src, 5)
    _train(b_net, dst, 5)
    for p, q in zip(a_net.parameters(), b_net.parameters(), strict=True):
        assert torch.equal(p, q)


def test_fresh_state_dict_has_no_moments_and_loads_as_zeros() -> None:
    net = _net(0)
    opt = Adam(net.parameters())
    assert opt.state_dict()["state"] == {}
    _train(net, opt, 2)
    opt.load_state_dict(Adam(_net(0).parameters()).state_dict())
    assert all(float(s) == 0 for s in opt.steps) and all(not m.any() for m in opt.exp_avgs)


def test_rejects_bad_arguments_and_mismatched_state() -> None:
    net = _net(0)
    with pytest.raises(ValueError, match="lr > 0"):
        Adam(net.parameters(), lr=0.0)
    with pytest.raises(ValueError, match="no parameters"):
        Adam([])
    other = Adam(torch.nn.Linear(3, 3).parameters())
    with pytest.raises(ValueError, match="parameters"):
        Adam(net.parameters()).load_state_dict(other.state_dict())


def test_does_not_import_dynamo() -> None:
    """The reason this class exists: torch.optim's Optimizer imports torch._dynamo (about 1 s)."""
    import subprocess

    code = ("import sys, torch\nfrom shell.optim import Adam\n"
            "net = torch.nn.Linear(3, 2); opt = Adam(net.parameters())\n"
            "net(torch.ones(1, 3)).sum().backward(); opt.step(); opt.state_dict()\n"
            "assert 'torch._dynamo' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
