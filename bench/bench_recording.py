"""Recording overhead: plain forward vs scimech recording at every block vs nnsight."""

from __future__ import annotations

import torch
from torch import nn

from bench.common import write_section
from scimech.record import Recorder


def model_and_batch():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(128, 8, 256, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
    return model, torch.randn(64, 64, 128)


def interleaved(runs: dict, rounds: int) -> dict:
    """Median seconds per call, alternating the runs each round (fair under background load)."""
    import statistics
    import time

    for fn in runs.values():
        fn()
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for k, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    torch.set_num_threads(2)
    model, x = model_and_batch()
    sites = [f"layers.{i}" for i in range(6)]

    @torch.no_grad()
    def plain():
        model(x)

    @torch.no_grad()
    def ours():
        with Recorder(model, sites) as rec:
            model(x)
        return [rec.activations[s] for s in sites]

    runs = {"plain": plain, "ours": ours}
    try:
        from nnsight import NNsight

        wrapped = NNsight(model)

        @torch.no_grad()
        def theirs():
            saved = []
            with wrapped.trace(x):
                for i in range(6):
                    saved.append(wrapped.layers[i].output.save())
            return saved

        got = theirs()
        assert len(got) == 6 and tuple(got[0].shape) == tuple(x.shape), "nnsight did not save the blocks"
        runs["nnsight"] = theirs
    except Exception as err:  # report, do not hide
        nn_error = f"nnsight could not run here: {type(err).__name__}: {err}"
    else:
        nn_error = None
    t = interleaved(runs, rounds=15)
    t_plain, t_ours = t["plain"], t["ours"]
    lines = ["Model: 6-block nn.TransformerEncoder (width 128, 8 heads), batch 64 x 64 tokens, CPU, 2 threads; "
             "median of 15 interleaved rounds.", "",
             "| run | ms / forward | ratio to plain |", "|---|---|---|",
             f"| plain forward | {t_plain * 1e3:.1f} | 1.00 |",
             f"| scimech Recorder, 6 blocks | {t_ours * 1e3:.1f} | {t_ours / t_plain:.2f} |"]
    if nn_error is None:
        t_nn = t["nnsight"]
        lines.append(f"| nnsight trace, 6 blocks saved | {t_nn * 1e3:.1f} | {t_nn / t_plain:.2f} |")
        lines += ["", f"scimech / nnsight time: {t_ours / t_nn:.2f}."]
    else:
        lines += ["", nn_error]
    write_section("recording", "Recording overhead", lines)


if __name__ == "__main__":
    main()
