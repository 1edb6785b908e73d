"""Test doubles and test servers, for bcas's own tests and for users' harness checks.

* :mod:`bcas.testing.mock` -- the registered ``mock`` backend (``mock:gold``,
  ``mock:verbose``, ``mock:random``): instant, deterministic answers to every kind of
  request the suite makes, valid under the request's JSON schema, labelled as a mock.
* :mod:`bcas.testing.scripted` -- a scripted chat model and fake retrievers for
  control-flow tests of the agent loop.
* :mod:`bcas.testing.instant` -- the instant agent double (search once, then answer;
  also as an asker searching with the question, and as canned replies for a loopback
  server); :mod:`bcas.testing.decliner` declines or answers by the item's number;
  :mod:`bcas.testing.coin` (right or wrong by a hash of the request) and
  :mod:`bcas.testing.paced` (cached, with a delay) are ``mock`` variants.  Each has a
  ``create`` a test registers as a backend (``"bcas.testing.instant:create"``).
* :mod:`bcas.testing.recording` -- a model in front of another that keeps every request
  and the usage it reported.
* :mod:`bcas.testing.servers` -- ``FaultServer`` (a scriptable OpenAI-compatible server
  on loopback that can also forward to an upstream server, injecting faults on a seeded
  schedule) and ``LlamaCppServer`` (a real llama.cpp server process).
* :mod:`bcas.testing.project` -- one builder of small pytest projects for plugin tests.

A double never stands in for a capability: every backend, retriever and treatment is
also exercised for real in the test suite.
"""
