"""``scaleright export PLAN.json --to FORMAT [--out DIR]``: the plan's layout as a launcher reads it."""

from __future__ import annotations

from pathlib import Path

import typer

from scaleright.cli.common import console, esc
from scaleright.errors import InputError


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)


def export_cmd(
    plan_file: Path = typer.Argument(..., help="A plan as `scaleright plan S --json` prints it."),
    to: str = typer.Option(..., "--to", help="torchrun, accelerate, deepspeed, megatron, torchtitan, skypilot, slurm "
                           "or k8s (training); vllm, sglang, skypilot or k8s (inference)."),
    out: Path | None = typer.Option(None, "--out", help="Directory to write the file into (created if its parent "
                                    "exists); without it the file is printed."),
) -> None:
    """Write the plan's recommended layout as a launch config: a torchrun script, an Accelerate FSDP config, a
    DeepSpeed JSON, Megatron-LM arguments, a torchtitan TOML, vLLM / SGLang serve commands, a SkyPilot task, a
    Slurm batch script or a Kubernetes manifest."""
    from scaleright.export import export_plan
    from scaleright.textfile import check_input_file, read_text
    from scaleright.userdata import load_json

    check_input_file("PLAN", plan_file)
    plan = load_json(read_text(plan_file), str(plan_file))
    if not isinstance(plan, dict):
        raise InputError(f"{plan_file}: not a scaleright plan (a JSON object from `scaleright plan S --json`)")
    files = export_plan(plan, to)
    if out is None:
        for text in files.values():
            typer.echo(text, nl=False)
        return
    for name in write_files(out, files, inputs=[plan_file]):
        console.print(f"wrote {esc(name)}")


def write_files(out: Path, files: dict[str, str], *, inputs: list[Path]) -> list[Path]:
    """Write ``files`` into the directory ``out`` atomically (creating ``out`` when its parent exists); no file may be
    one of ``inputs``. Returns the paths written."""
    from scaleright.textfile import path_problem, refuse_input_as_output, write_atomic

    why = path_problem(out, want="dir")
    if why == "directory not found":
        if path_problem(out.parent, want="dir") is not None:
            raise InputError(f"--out={out}: its parent directory {str(out.parent)!r} does not exist")
        try:
            out.mkdir()
        except OSError as exc:
            raise InputError(f"--out={out}: cannot create it ({exc.strerror or exc})") from None
    elif why is not None:
        raise InputError(f"--out={out}: {why}")
    written = []
    for name, text in files.items():
        target = out / name
        refuse_input_as_output("--out", target, inputs)
        write_atomic("--out", target, text)
        written.append(target)
    return written
