"""Reports of a run: summaries and paired statistics from records, the HTML report and
its figures, and ``bcas compare``.  Rendering only: nothing here runs a
model or knows pytest; the harness (:mod:`bcas.harness`) calls it at the end of a run."""
