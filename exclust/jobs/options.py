"""The options schema of each job, declared once: ``explain_options()``, ``LABEL``, ``DEMO``.

``ExplainConfig`` (``exclust.jobs.config``), the ``exclust`` parser (``exclust.cli.build_parser``)
and the flow forms (``flows.params``) are generated from these tuples; nothing else lists an
option. Choices come from the registries (algorithms and their own options: ``jobs.registry``;
reference kinds: ``jobs.references``; output table formats: ``outputs.lake_table``).
"""
from __future__ import annotations

from exclust.jobs import references, registry
from exclust.jobs.option_spec import (
    ANYTHING,
    AUTO_SWITCH,
    CHOICE,
    CLI,
    CONFIG,
    FLOW,
    MAPPING,
    NAMES,
    SWITCH,
    TEXT,
    WHOLE,
    Option,
    by_name,
)

CLI_AND_FLOW = frozenset({CLI, FLOW})
INPUT_HELP = ("input: a Parquet file, folder or glob, a Delta table folder, an Iceberg table "
              "iceberg+<catalog URI>#namespace.table, or an s3:// URL of any of them")
STORAGE_OPTIONS = Option(
    "storage_options", MAPPING, None, "options of the object store s3:// paths live on (repeatable on the command "
    "line), e.g. endpoint_url=http://minio:9000", cli_aliases=("--storage-option",),
    flow_help="Options of the object store s3:// paths live on: comma-separated key=value "
              "(endpoint_url=http://minio:9000) or a JSON object for nested options; blank: the AWS_* environment "
              "of the machine that runs the flow.")
SCHEDULER_ADDRESS = Option(
    "scheduler_address", TEXT, None, "Dask scheduler address such as tcp://dask-scheduler:8786",
    unset_means="a local Dask cluster started for the run", cli_aliases=("--scheduler",), surfaces=CLI_AND_FLOW,
    flow_help="Dask scheduler address such as tcp://dask-scheduler:8786; blank: the worker's EXCLUST_DASK_SCHEDULER, "
              "or a local Dask cluster started for the run when that is unset too.")
QUIET = Option("quiet", SWITCH, False, "no progress lines", surfaces=frozenset({CLI}))

# The explain job's options every algorithm reads; the algorithms' own options follow (explain_options).
EXPLAIN_COMMON = (
    Option("input", ANYTHING, None, INPUT_HELP, required=True,
           flow_help="Input seen from the machine that runs the flow: a Parquet file, folder or glob, a Delta table "
                     "folder, an Iceberg table iceberg+<catalog URI>#namespace.table, or an s3:// URL of any of them."),
    Option("output", TEXT, None, "output folder for tree.json, metrics.json, rules.txt and report.html, "
           "replaced whole when the run succeeds", required=True, cli_aliases=("--out",), surfaces=CLI_AND_FLOW),
    Option("features", NAMES, None, "feature columns, comma-separated, in order",
           unset_means="every numeric column except the run's label columns", flow_aliases=("columns",)),
    Option("algorithm", CHOICE, registry.DEFAULT_ALGORITHM, "tree algorithm",
           choices=lambda: tuple(registry.ALGORITHMS),
           describe_choices=lambda: {a.name: a.summary for a in registry.ALGORITHMS.values()}, flow_type="Algorithm"),
    Option("n_clusters", WHOLE, 5, "number of clusters k of the reference clustering (2 or more)", required=True,
           minimum=2, maximum=10_000, unit="clusters", cli_aliases=("--k",), config_aliases=("k",)),
    Option("reference", CHOICE, "gmm", "reference clustering; labels reads the column reference_column names "
           "(the command line also takes labels:COLUMN)", choices=lambda: tuple(references.REFERENCES),
           describe_choices=lambda: {r.name: r.summary for r in references.REFERENCES.values()},
           flow_type="ReferenceKind", cli_type=str, metavar="KIND"),
    Option("reference_column", TEXT, None, "label column of the reference labels", unset_means="none"),
    Option("truth", TEXT, None, "ground-truth label column, scored with ARI", unset_means="none",
           flow_aliases=("truth_column",)),
    Option("objective", CHOICE, "kmeans", "cost the tree keeps low: kmeans or kmedians (imm, exkmc, exshallow, "
           "exgreedy, random-cut)", choices=lambda: registry.OBJECTIVES, flow_type="Objective"),
    Option("cost_curve", SWITCH, True, "draw the report's cost-versus-leaves curve (data-driven trees)",
           cli_flags=(("--no-curve", False),)),
    Option("standing", SWITCH, True, "set the tree beside the other greedy algorithms' trees on the same centers in "
           "the report (no extra pass)"),
    Option("kmedians_price", AUTO_SWITCH, None, "price the tree under k-medians too (2+ passes more over the data)",
           unset_means="when the objective or the reference is kmedians", flow_type="KmediansPrice"),
    SCHEDULER_ADDRESS,
    Option("plot_features", NAMES, None, "two features for the report's scatter plot, comma-separated",
           unset_means="the features of the tree's first cuts", cli_aliases=("--plot",)),
    Option("random_state", WHOLE, 0, "seed of every random choice", cli_aliases=("--seed",)),
    Option("nan_policy", CHOICE, "keep", "NaN and nulls in the features: keep them as missing values (the tree "
           "routes them; infinities fail the run), drop their rows, or fail the run (raise)",
           choices=lambda: ("keep", "drop", "raise"), cli_flags=(("--drop-nan", "drop"),), flow_type="NanPolicy"),
    Option("categorical", NAMES, None, "integer columns among the features to treat as categories (codes), "
           "comma-separated; text, dictionary and boolean columns are categories already",
           unset_means="the categories the schema tells"),
    Option("cluster_on", NAMES, None, "numeric columns the reference clustering is fitted on (an embedding, a PCA), "
           "comma-separated; the tree cuts the features", unset_means="the features (their numeric ones when some "
           "are categories)"),
    Option("table_version", WHOLE, None, "a Delta or Iceberg table input: the version to read (Iceberg: a snapshot id)",
           unset_means="the latest (or as_of)", minimum=0, flow_unset=-1, metavar="N"),
    Option("as_of", TEXT, None, "a Delta or Iceberg table input: read the snapshot current at this time (ISO 8601)",
           unset_means="the latest", metavar="TIMESTAMP"),
    STORAGE_OPTIONS,
    Option("title", TEXT, None, "the report's title", surfaces=frozenset({CONFIG})),
    Option("hold", AUTO_SWITCH, None, "keep the validated data on the workers (None: decided by size)",
           surfaces=frozenset({CONFIG})),
    QUIET,
)


def explain_options() -> tuple[Option, ...]:
    """The explain job's schema: the common options, then every registered algorithm's own options."""
    return tuple(by_name([*EXPLAIN_COMMON, *registry.own_options()]).values())


LABEL = (
    Option("tree", TEXT, None, "tree.json written by explain (a path or an s3:// URL)", required=True),
    Option("input", TEXT, None, "input to label: a Parquet file, folder or glob, or an s3:// URL of one; {date} in it "
           "is replaced by the date labelled", required=True),
    Option("output", TEXT, None, "output folder or s3:// prefix for the labelled files (same relative paths as the "
           "input), a Delta table, or an Iceberg table iceberg+<catalog URI>#namespace.table; {date} in it is the "
           "date labelled", required=True, cli_aliases=("--out",)),
    Option("date", TEXT, None, "label by date: YYYY-MM-DD or an inclusive range FIRST..LAST; input and output then "
           "hold {date}, e.g. incoming/date={date}",
           unset_means="the paths as given; the flow: the date the run was scheduled for (UTC)"),
    Option("fail_on_drift", SWITCH, False, "exit with status 3 when a labelled date's rows per leaf drifted from the "
           "data the tree was built on (PSI above 0.2); the labelled output is written either way",
           surfaces=frozenset({CLI})),
    Option("output_format", CHOICE, "auto", "delta or iceberg: output is a table of that format (made on the first "
           "night), each date one commit of its date partition; auto: iceberg for an iceberg+ address, delta when "
           "output is a Delta table already, else folder", cli_aliases=("--out-format",),
           choices=lambda: ("auto", "folder", *_table_formats()), flow_type="OutputFormat"),
    Option("date_column", TEXT, "date", "a table output's date partition column"),
    Option("cluster_column", TEXT, "cluster", "name of the cluster column added to every file"),
    Option("leaf_column", TEXT, "leaf", "name of the leaf-id column added to every file"),
    STORAGE_OPTIONS,
    SCHEDULER_ADDRESS,
    QUIET,
)


def _table_formats() -> tuple[str, ...]:
    from exclust.outputs.lake_table import TABLE_FORMATS

    return tuple(TABLE_FORMATS)


def demo_options() -> tuple[Option, ...]:
    """``exclust demo``: a sample mixture's size, then the explain options it passes on, with the demo's defaults."""
    explain = by_name(explain_options())
    return (
        explain["output"].but(default="exclust-demo", required=False, help="output folder"),
        Option("rows", WHOLE, 300_000, "rows of the sample dataset", minimum=1),
        explain["n_clusters"].but(required=False, help="components of the sample mixture (2 or more)"),
        Option("d", WHOLE, 2, "features of the sample mixture", minimum=1),
        explain["algorithm"], explain["threshold"], explain["scheduler_address"], explain["random_state"],
        Option("prefect", SWITCH, False, "run the steps through the Prefect flow explain (without PREFECT_API_URL this "
               "starts Prefect's temporary local server, about 15 s); default: the steps directly, no Prefect"),
    )
