"""Optional integrations with third-party model libraries.

Nothing here is imported by the package itself: ``import torchscan_stages`` never imports
``transformers``. Each module imports its library when it is used and says how to install
it when it is missing.

Never: gets imported by the package, except by the one named plug-in load
(``analysis/hf_registration.py``).
"""
