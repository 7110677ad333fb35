"""Retrievers for RAG frameworks over plait, each an extra of its own.

* :mod:`plait.integrations.langchain` — ``PlaitRetriever``, a langchain-core
  ``BaseRetriever`` (``pip install 'plait[langchain]'``).
* :mod:`plait.integrations.llamaindex` — ``PlaitRetriever``, a llama-index-core
  ``BaseRetriever`` (``pip install 'plait[llamaindex]'``).

Both take an embedded :class:`~plait.Plait` or a served :class:`~plait.Client` /
:class:`~plait.AsyncClient` as ``engine`` and carry each hit's citation contract in
the result's metadata (:func:`plait.integrations.common.hit_metadata`). Importing this
package imports neither framework.
"""
