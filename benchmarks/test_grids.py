"""The evaluation grids as pytest cases (what a user runs).

``pytest benchmarks --bcas-grid smoke`` runs the smoke grid on the embedded CPU
default; see ``pytest --help`` (section "bcas") for models, datasets, grids, the
judge, price sheets, the baseline gate and the report directory.  The case itself
lives in the package, so a folder of your own runs grids with this same line.
"""

from bcas.harness.suite import test_case  # noqa: F401  (collected here, parametrised by the bcas plugin)
