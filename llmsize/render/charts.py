"""Roofline and KV-cache charts: in the terminal (no extra) or as PNG/SVG through matplotlib (the
`charts` extra). Axis labels carry units; SVG keeps its text as text so the labels can be searched."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

from llmsize.errors import InvalidValueError, LlmsizeError, install_hint
from llmsize.files import check_output, write_output
from llmsize.render.ascii_chart import plot

ROOF_X = [10 ** (e / 4) for e in range(-4, 21)]  # 0.1 .. 1e5 FLOP/byte
X_ROOF = "arithmetic intensity (FLOP/byte)"
Y_ROOF = "attainable performance (TFLOP/s)"
X_KV = "context (tokens)"
Y_KV = "KV cache per sequence (GB = 10^9 B)"


def _roof_curve(r) -> list[tuple[float, float]]:
    return [(x, y / 1e12) for x, y in r.curve(ROOF_X)]  # TFLOP/s


def roof_series(model_name: str, roofs) -> list[tuple[str, list[tuple[float, float]], str]]:
    """Each card's roof (a line) and the model's decode and prefill points on it, in TFLOP/s."""
    series = []
    for r in roofs:
        series.append((f"{r.gpu.id} roof", _roof_curve(r), "line"))
        series.append((f"{r.gpu.id} {model_name}", [(p.intensity_flop_per_byte, p.flop_per_s / 1e12)
                                                   for p in r.points], "points"))
    return series


def roofline_json(model_id: str, inputs, roofs) -> dict:
    """roofline --json: each card's roof and the model's points on it (units in the keys; quant as given, None: the
    model's release format)."""
    return {"model": model_id, "quant": inputs.quant, "kv_dtype": inputs.kv_dtype,
            "context_tokens": inputs.context_tokens,
            "cards": [{"id": r.gpu.id, "bandwidth_gb_s": r.bandwidth_bytes_per_s / 1e9,
                       "peak_tflops": r.peak_flop_per_s / 1e12 if r.peak_flop_per_s else None,
                       "precision": r.precision, "ridge_flop_per_byte": r.ridge_flop_per_byte,
                       "max_sequences": r.max_sequences,
                       "points": [{"label": p.label, "intensity_flop_per_byte": p.intensity_flop_per_byte,
                                   "tflop_per_s": p.flop_per_s / 1e12, "bound": p.bound, "fits": p.fits}
                                  for p in r.points]} for r in roofs]}


def kv_json(model_id: str, fmt_id: str, weights_bytes: float, users: int, curves, crossovers: dict) -> dict:
    """kv --json: the cache of `users` sequences by context and KV dtype, the weights beside it (bytes, GB = 10^9 B
    where a key says GB), and where the cache overtakes them (None: not within the range)."""
    return {"model": model_id, "weights": {"format": fmt_id, "bytes": weights_bytes}, "users": users,
            "curves": [{"kv_dtype": c.dtype, "context_tokens": c.contexts, "kv_bytes": c.bytes_per_sequence}
                       for c in curves],
            "crossover_tokens": crossovers}


def roofline_text(model_name: str, roofs, width: int = 100) -> str:
    series = roof_series(model_name, roofs)
    title = f"Roofline: {model_name} decode (batch 1, 2, 4 ...) and prefill points"
    text = plot(series, title, X_ROOF, Y_ROOF, width=width)
    lines = [text]
    for r in roofs:
        ridge = f"ridge {r.ridge_flop_per_byte:,.0f} FLOP/byte" if r.ridge_flop_per_byte else "peak unknown"
        pts = ", ".join(f"{p.label} at {p.intensity_flop_per_byte:,.1f} FLOP/byte ({p.bound}"
                        + ("" if p.fits else f"; beyond the {r.max_sequences:,} sequences whose cache fits") + ")"
                        for p in r.points
                        if p.label.startswith("prefill") or p.label.endswith(("b=1", "b=64", "b=1024")))
        lines += textwrap.wrap(f"{r.gpu.id}: {r.bandwidth_bytes_per_s / 1e9:,.0f} GB/s, "
                               f"{(r.peak_flop_per_s or 0) / 1e12:,.0f} TFLOPS {r.precision or ''}, {ridge}; {pts}",
                               width, subsequent_indent="  ")
    return "\n".join(lines)


def kv_text(model_name: str, curves, weights_bytes: float, weights_label: str, crossovers: dict,
            width: int = 100, users: int = 1) -> str:
    series = [(f"KV {c.dtype}", [(x, y / 1e9) for x, y in zip(c.contexts, c.bytes_per_sequence)], "line")
              for c in curves]
    ctx = curves[0].contexts
    series.append((f"weights {weights_label}", [(ctx[0], weights_bytes / 1e9), (ctx[-1], weights_bytes / 1e9)],
                   "line"))
    who = "one sequence" if users == 1 else f"{users} sequences"
    text = plot(series, f"KV cache vs context: {model_name}, {who}", X_KV, _y_kv(users), width=width)
    over = "; ".join(f"{dt}: {'not within the range' if t is None else f'{t:,} tokens'}"
                     for dt, t in crossovers.items())
    return text + "\n" + "\n".join(textwrap.wrap(f"the cache of {who} outweighs the weights from: {over}", width))


def _y_kv(users: int) -> str:
    return Y_KV if users == 1 else f"KV cache of {users} sequences (GB = 10^9 B)"


def check_image_path(path: Path) -> None:
    """-o of a chart: a .png or .svg that llmsize.files may write (before any work)."""
    if not path.name or str(path) == ".":  # `-o ''` (a Path of it reads as the current folder)
        raise InvalidValueError("-o names no file.", "Give the chart's file, e.g. -o chart.png or -o chart.svg.")
    if path.name.lower() in (".png", ".svg"):  # a dot file to pathlib, whose suffix is then ''
        raise InvalidValueError(f"-o `{path}` names no file before {path.name}.",
                                f"Give the chart's file, e.g. -o chart{path.name.lower()}.")
    if path.suffix.lower() not in (".png", ".svg"):
        raise InvalidValueError(f"-o `{path}` must end in .png or .svg.", "Pick one of the two.")
    check_output(path, "-o")


def pyplot_for(path: Path):
    check_image_path(path)
    try:
        import matplotlib
    except ImportError:
        raise LlmsizeError("Image output needs matplotlib, which is not installed.",
                           install_hint("charts", "matplotlib") + " Or drop -o for a terminal chart.") from None
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # keep text as <text> in SVG
    import matplotlib.pyplot as plt

    return plt


def finish_log_axes(ax, xlabel: str, ylabel: str, title: str, legend_size: int) -> None:
    """Log-log axes with their labels (units in them), a title, a light grid and the legend."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)


def save_figure(fig, plt, path: Path) -> None:
    """Drawn in memory, then written whole through llmsize.files (never over a device, FIFO or symlink)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lower().lstrip("."), dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_output(path, buf.getvalue(), "-o")


def roofline_image(model_name: str, roofs, path: Path) -> None:
    plt = pyplot_for(path)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    for i, r in enumerate(roofs):
        color = f"C{i}"
        xs, ys = zip(*_roof_curve(r))
        ax.plot(xs, ys, color=color, label=f"{r.gpu.name} ({r.bandwidth_bytes_per_s / 1e9:,.0f} GB/s)")
        dec = [p for p in r.points if p.label.startswith("decode")]
        for fits in (True, False):  # hollow: a batch whose cache the card does not hold
            at = [p for p in dec if p.fits == fits]
            ax.scatter([p.intensity_flop_per_byte for p in at], [p.flop_per_s / 1e12 for p in at], marker="o", s=18,
                       zorder=3, edgecolors=color, facecolors=color if fits else "none")
        for p in dec:
            if p.label.endswith(("b=1", "b=16", "b=256")):
                ax.annotate(p.label.split()[-1], (p.intensity_flop_per_byte, p.flop_per_s / 1e12), fontsize=7,
                            textcoords="offset points", xytext=(4, -9))
        pre = [p for p in r.points if p.label.startswith("prefill")]
        ax.scatter([p.intensity_flop_per_byte for p in pre], [p.flop_per_s / 1e12 for p in pre], color=color,
                   marker="^", s=40, zorder=3)
    finish_log_axes(ax, X_ROOF, Y_ROOF, f"Roofline: {model_name}, decode points (o, by batch; hollow: beyond what "
                    "the cache holds) and prefill (^)", 8)
    save_figure(fig, plt, path)


def kv_image(model_name: str, curves, weights_bytes: float, weights_label: str, path: Path,
             users: int = 1) -> None:
    plt = pyplot_for(path)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    for c in curves:
        ax.plot(c.contexts, [b / 1e9 for b in c.bytes_per_sequence], marker=".", label=f"KV cache, {c.dtype}")
    ax.axhline(weights_bytes / 1e9, color="black", linestyle="--", label=f"weights, {weights_label}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(X_KV)
    ax.set_ylabel(_y_kv(users))
    ax.set_title(f"KV cache vs context: {model_name}, {users} sequence{'s' if users > 1 else ''}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, plt, path)
