"""The run engine, without pytest: settings, plan, shared resources, run kinds, the case executor.

Two front doors drive it: the pytest plugin (:mod:`bcas.harness.plugin`: options ->
settings -> plan -> one test item per case -> :meth:`bcas.run.session.BcasSession.run_case`)
and the Python API (:func:`bcas.evaluate`: keyword arguments -> the same settings, plan
and cases).  Both write the same run folder: records through the store
(:mod:`bcas.records`), ``run.json`` (:mod:`bcas.run.manifest`), the summaries and the
HTML report (:mod:`bcas.run.finalize`).

Importing this package is cheap and imports no pytest; the modules load on use.
"""
