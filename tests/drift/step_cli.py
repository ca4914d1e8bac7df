"""The command line the step files share (`steps.py`, `framework_steps.py`).

    python STEPS_FILE NAME     run the step NAME: it fails, and its error ends the process
    python STEPS_FILE --list   print every step as NAME and its columns, one per line
"""

import sys


def main(argv, steps, columns):
    """Run ``argv``'s step of ``steps`` (name -> step with a ``run``), or list them with
    ``columns(step)``. A step that does not fail exits 3: the generators keep only failures."""
    if argv[1:] == ["--list"]:
        for name, step in steps.items():
            print(" ".join([name, *columns(step)]))
        return 0
    if len(argv) != 2 or argv[1] not in steps:
        print(f"usage: {argv[0]} NAME (--list for the names)", file=sys.stderr)
        return 2
    steps[argv[1]].run()
    print(f"{argv[1]}: the step did not fail", file=sys.stderr)
    return 3
