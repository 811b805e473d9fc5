"""Print the configuration a job would run with: every field, its value and what it means.

    python -m jobs.show_config [--config FILE] [--set SECTION.FIELD=VALUE ...] [--json]

Values come from the defaults, the file, ``BOOKINDEX_<SECTION>__<FIELD>`` variables and
``--set``, in that order (operators/config.py; docs/architecture.md §2).
"""

from __future__ import annotations

import argparse
import json
import sys

from operators.config import ConfigError, add_config_arguments, config_from_args, describe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.show_config", description=__doc__)
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the values as JSON")
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except (ConfigError, OSError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.json:
        values = config.model_dump(mode="json")
        values["models"]["api_key"] = ""
        print(json.dumps(values, indent=2))
    else:
        print(describe(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
