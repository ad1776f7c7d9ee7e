"""Model cost from one forward call: the crawl, its layer records, and operator FLOPs.

``crawl.py`` runs one hooked forward (its arguments checked in ``crawl_inputs.py``, the hooks
and the call tree they record in ``recorder.py``) and builds the records after it
(``layer_records.py``, from each call's ``own_parts.py`` summed by ``layer_sums.py``); module
formulas are handlers in one registry (``handlers.py``, one file per family in
``module_formulas/``); operator formulas are one table (``operators/``, one file per family in
``operator_formulas/``) merged per call with torch's and the user's. A new layer or operator
family is one new file.

Never: times anything; imports measure or render.
"""
