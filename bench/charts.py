"""Charts the benchmarks draw of their own figures (matplotlib, no display needed), as PNG files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curves(
    path: Path, title: str, x_label: str, x: Sequence[float], panels: Mapping[str, Mapping[str, Sequence[float]]]
) -> None:
    """One panel per ``panels`` item (its y label → {series: values over ``x``}), side by side, log-2 x axis."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2))
    for ax, (y_label, series) in zip(axes, panels.items(), strict=True):
        for name, values in series.items():
            ax.plot(x, values, marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(x), [f"{v:g}" for v in x])
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.grid(True, alpha=0.3)
        ax.legend()
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def bars(path: Path, title: str, x_label: str, values: Mapping[str, float]) -> None:
    """Horizontal bars, one per ``values`` item, each labelled with its value."""
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(9, 0.45 * len(values) + 1.2))
    names = list(values)
    ax.barh(names, [values[n] for n in names], color="#4f8fd6")
    for i, name in enumerate(names):
        ax.text(values[name], i, f" {values[name]:,.0f}", va="center")
    ax.invert_yaxis()
    ax.set_xlabel(x_label)
    ax.set_title(title)
    ax.set_xlim(0, max(values.values()) * 1.2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
