"""The walk: which exclust/flows modules the driver's execution passes through in one explain run.

    PYTHONPATH=<checkout> .venv/bin/python bench/walk_imports.py [--rows 20000] [--show]
        [--algorithm mmdt] [--reference gmm]

Runs one small explain job in this process (algorithm ``mmdt``, reference ``gmm`` unless told, k = 4, on a
Parquet folder written by ``exclust.datasets.synthetic.write_gmm_parquet`` into a temporary
folder, output there too; both are removed at the end) under ``sys.setprofile``, and follows the
module of the innermost exclust/flows frame on the driver's thread: a call into a project function
moves there, a return from one moves back to the innermost project frame left on the stack
(what runs in numpy, Dask or numba in between counts as the module that called it; worker
processes and other threads are not followed). Consecutive frames of one module collapse into one
stay. Reported for the step ``fit reference`` alone (from the call of
``pipeline.fit_reference`` to its return) and for the whole ``run_explain``:

- modules entered: distinct modules in the walk;
- moves: changes of module;
- climbs back up: moves made by a return (back to a caller's module);
- returns to a module already left: moves into a module the walk was in before;
- distinct moves: the different (from, to) pairs of modules among the moves (loops, such as EM's
  iterations, repeat moves; this count does not grow with them).

A warm-up run (not traced) goes first, so the traced run imports nothing and compiles nothing:
the walk is the call structure, not the import order. Module-level code (``<module>`` frames)
is not followed in any case.

Works on the layout by layer (``exclust.jobs.explain.steps``, ``exclust.jobs.config``) and on the flat
layout before it (``exclust.steps``, ``exclust.pipeline``): whichever the checkout first on
``sys.path`` holds.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import tempfile
import warnings
from pathlib import Path

PROJECT = ("exclust", "flows")


def layout():
    """(steps module, pipeline module, ExplainConfig, layout name) of the checkout on sys.path."""
    try:
        steps = importlib.import_module("exclust.jobs.explain.steps")
        pipeline = importlib.import_module("exclust.jobs.explain.pipeline")
        config = importlib.import_module("exclust.jobs.config").ExplainConfig
        return steps, pipeline, config, "by layer (exclust.jobs.*)"
    except ModuleNotFoundError:
        steps = importlib.import_module("exclust.steps")
        pipeline = importlib.import_module("exclust.pipeline")
        return steps, pipeline, pipeline.ExplainConfig, "flat (exclust.steps, exclust.pipeline)"


def project_module(frame) -> str | None:
    """The project module a frame runs in, or None (other code, or a module's top level)."""
    if frame.f_code.co_name == "<module>":
        return None
    name = frame.f_globals.get("__name__") or ""
    return name if name.split(".")[0] in PROJECT else None


def innermost_project_module(frame) -> str | None:
    while frame is not None:
        module = project_module(frame)
        if module is not None:
            return module
        frame = frame.f_back
    return None


class Walk:
    """The collapsed sequence of project modules, each stay with how it was reached."""

    def __init__(self, window_code):
        self.stays: list[tuple[str, str]] = []  # (module, "call" | "return")
        self.window_code = window_code
        self.window: tuple[int, int | None] | None = None  # stay indices of the traced step
        self.window_frame = None

    def move(self, module: str | None, how: str) -> None:
        if module is not None and (not self.stays or self.stays[-1][0] != module):
            self.stays.append((module, how))

    def profile(self, frame, event, arg):
        if event == "call":
            module = project_module(frame)
            if module is None:
                return
            self.move(module, "call")
            if frame.f_code is self.window_code and self.window is None:
                self.window, self.window_frame = (len(self.stays) - 1, None), frame
        elif event == "return":
            if project_module(frame) is None:
                return  # leaving other code: the innermost project frame is unchanged
            if frame is self.window_frame:
                self.window, self.window_frame = (self.window[0], len(self.stays)), None
            self.move(innermost_project_module(frame.f_back), "return")


def figures(stays: list[tuple[str, str]]) -> dict:
    seen: set[str] = set()
    returns_to_left = 0
    for i, (module, _) in enumerate(stays):
        if i and module in seen:
            returns_to_left += 1
        seen.add(module)
    return {
        "modules entered": len(seen),
        "moves": max(len(stays) - 1, 0),
        "climbs back up": sum(1 for _, how in stays[1:] if how == "return"),
        "returns to a module already left": returns_to_left,
        "distinct moves": len({(a, b) for (a, _), (b, _) in zip(stays, stays[1:], strict=False)}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--algorithm", default="mmdt")
    parser.add_argument("--reference", default="gmm")
    parser.add_argument("--show", action="store_true",
                        help="print the fit-reference walk, one stay a line, and each walk's modules")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("distributed").setLevel(logging.ERROR)

    import exclust
    from exclust.datasets.synthetic import write_gmm_parquet

    steps, pipeline, ExplainConfig, name = layout()
    print(f"exclust from {Path(exclust.__file__).parent}; layout {name}; {args.algorithm} on {args.reference}")
    with tempfile.TemporaryDirectory(prefix="exclust-walk-") as tmp:
        data = Path(tmp) / "gmm"
        write_gmm_parquet(data, n_samples=args.rows, n_components=4, n_features=2, rows_per_file=args.rows // 4)

        def config():
            return ExplainConfig(input=str(data), features=["x0", "x1"], k=4, algorithm=args.algorithm,
                                 reference=args.reference)

        steps.run_explain(config(), Path(tmp) / "warm-up")
        walk = Walk(pipeline.fit_reference.__code__)
        sys.setprofile(walk.profile)
        try:
            steps.run_explain(config(), Path(tmp) / "traced")
        finally:
            sys.setprofile(None)

    start, end = walk.window
    step = walk.stays[start:end]
    report = {"fit reference": figures(step), "whole run": figures(walk.stays)}
    if args.show:
        print("fit reference, stay by stay (how it was reached):")
        for module, how in step:
            print(f"  {how:6}  {module}")
        for name, stays in (("fit reference", step), ("whole run", walk.stays)):
            print(f"{name}, modules in the order first entered:", " ".join(dict.fromkeys(m for m, _ in stays)))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
