"""langrepr's Hydra launchers: the existing joblib and submitit launchers, with failed cells reported on the console.

Hydra only instantiates launcher classes found under the `hydra_plugins` namespace package, hence this folder.
"""
