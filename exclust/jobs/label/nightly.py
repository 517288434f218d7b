"""Labelling by date: ``{date}`` in the input and output paths, one date or an inclusive range.

A nightly job labels one night's partition (``incoming/date=2026-11-20`` into
``labelled/date=2026-11-20``); a backfill (``2026-11-20..2026-11-22``) labels a range one date
after another (``label_run.run_label``). Each date is its own ``label_date`` call, so each date's
output folder appears whole or not at all, replacing that date's folder only; a failure on a later date leaves the
dates before it committed. A date whose input is missing (or holds no Parquet file yet) is
skipped with a message that says so, and nothing is written for it.

Both paths must hold ``{date}`` when a date is given: with a fixed output every date would
replace the same folder, with a fixed input every date would label the same files.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from exclust.errors import InputError

DATE_PLACEHOLDER = "{date}"
RANGE_SEPARATOR = ".."
MAX_DATES = 3660  # ten years of nights: a longer range is a typo, not a backfill
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_date(text: str) -> date:
    """A calendar date written YYYY-MM-DD."""
    text = str(text).strip()
    if not _ISO_DATE.fullmatch(text):
        raise InputError(f"date {text!r} is not written YYYY-MM-DD (for example 2026-11-20)")
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise InputError(f"date {text!r} does not exist: {exc}") from None


def parse_dates(text: str) -> list[date]:
    """``YYYY-MM-DD`` -> that date; ``FIRST..LAST`` -> every date from FIRST to LAST inclusive."""
    text = str(text).strip()
    if RANGE_SEPARATOR not in text:
        return [parse_date(text)]
    first_text, _, last_text = text.partition(RANGE_SEPARATOR)
    first, last = parse_date(first_text), parse_date(last_text)
    if last < first:
        raise InputError(f"date range {text} ends before it starts; write it FIRST..LAST, e.g. {last}..{first}")
    days = (last - first).days + 1
    if days > MAX_DATES:
        raise InputError(f"date range {text} holds {days} dates (more than {MAX_DATES}); split the backfill")
    return [first + timedelta(days=i) for i in range(days)]


def has_date(path: str | os.PathLike | None) -> bool:
    """True when ``path`` holds the ``{date}`` placeholder."""
    return path is not None and DATE_PLACEHOLDER in str(path)


def fill_date(template: str | os.PathLike, day: date | None) -> str:
    """``template`` with every ``{date}`` replaced by ``day`` (YYYY-MM-DD); as given when ``day`` is None."""
    text = str(template)
    return text if day is None else text.replace(DATE_PLACEHOLDER, day.isoformat())


def check_templates(input_template: str, output_template: str, dated: bool, table: str | None = None) -> None:
    """InputError unless both paths hold ``{date}`` when labelling by date (and neither when not); a
    table output (``table``: its format) holds every date as a partition: its path holds no ``{date}``."""
    if table is not None:
        if not dated:
            raise InputError(f"a {table} table output takes each night as a partition of its date column: give "
                             "--date (YYYY-MM-DD or FIRST..LAST)")
        if has_date(output_template):
            raise InputError(f"the output table {output_template} holds {DATE_PLACEHOLDER}: a table holds every "
                             "night as a partition of its date column; give the table's path alone")
        if not has_date(input_template):
            raise InputError(f"the input path {input_template} has no {DATE_PLACEHOLDER}: every date would label the "
                             f"same files; write it like incoming/date={DATE_PLACEHOLDER}")
        return
    if not dated:
        for what, path in (("input", input_template), ("output", output_template)):
            if has_date(path):
                raise InputError(f"the {what} path {path} holds {DATE_PLACEHOLDER} but no date was given; give a date "
                                 "(YYYY-MM-DD or FIRST..LAST)")
        return
    if not has_date(output_template):
        raise InputError(f"the output path {output_template} has no {DATE_PLACEHOLDER}: every date would replace the "
                         f"same folder; write it like labelled/date={DATE_PLACEHOLDER}")
    if not has_date(input_template):
        raise InputError(f"the input path {input_template} has no {DATE_PLACEHOLDER}: every date would label the "
                         f"same files; write it like incoming/date={DATE_PLACEHOLDER}")


def missing_input(path: str, storage_options: dict | None = None) -> str | None:
    """Why there is nothing to label at ``path`` (it does not exist, or holds no Parquet file); None when there is."""
    from exclust.sources.storage import filesystem, list_source

    filesystem(path, storage_options)  # a missing filesystem package is an error to fix, not an empty night
    try:
        list_source(path, storage_options)
    except InputError as exc:
        return str(exc)
    return None


@dataclass
class NightOutcome:
    """What labelling one date (or the undated paths) did: labelled, or skipped for want of input."""

    day: date | None
    input: str
    output: str
    result: Any = None  # the LabelResult when labelled
    skipped: str | None = None  # why nothing was written

    @property
    def name(self) -> str:
        return self.day.isoformat() if self.day is not None else "input"

    def summary(self) -> str:
        """One line for logs and the command line."""
        if self.skipped is not None:
            return f"{self.name}: nothing to label ({self.skipped}); nothing written"
        from exclust.scoring.drift import drift_text

        r = self.result
        unseen = "".join(f"; {n} unseen categories in '{name}'" for name, n in sorted(r.unseen_categories.items()))
        return (f"{self.name}: labelled {r.n_rows} rows in {r.n_files} file(s) into {r.out}{unseen}; "
                f"{drift_text(r.drift)}")

    @property
    def drifted(self) -> bool:
        """Whether this date was labelled and its rows per leaf drifted from the built-on shares."""
        return self.result is not None and bool(self.result.drift) and bool(self.result.drift["drifted"])

    def to_dict(self) -> dict[str, Any]:
        doc = {"date": self.day.isoformat() if self.day else None, "input": self.input, "output": self.output,
               "status": "skipped" if self.skipped is not None else "labelled"}
        if self.skipped is not None:
            doc["reason"] = self.skipped
        else:
            doc.update(self.result.to_dict())
        return doc


def label_date(tree, input_template: str, output_template: str, day: date | None, **options) -> NightOutcome:
    """Label one date's input into that date's output folder (atomically); skip when the input is absent."""
    from exclust.jobs.label.labeling import label_parquet

    table_format = options.pop("table_format", None)  # a lake table output: the night is one commit to it
    date_column = options.pop("date_column", None) or "date"
    source, out = fill_date(input_template, day), fill_date(output_template, day)
    outcome = NightOutcome(day, source, out)
    if day is not None:
        outcome.skipped = missing_input(source, options.get("storage_options"))
        if outcome.skipped is not None:
            return outcome
    if table_format is not None:
        from exclust.jobs.label.table_labeling import label_night_into_table

        assert day is not None  # check_templates: a table output takes each night by its date
        outcome.result = label_night_into_table(tree, source, out, day, table_format=table_format,
                                                date_column=date_column, **options)
        return outcome
    outcome.result = label_parquet(tree, source, out, **options)
    return outcome
