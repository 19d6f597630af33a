"""The public releases, one module per function (``dpfast.methods.ir_dp`` holds ``ir_dp``).

Nothing is re-exported here: :mod:`dpfast` binds the public functions, so that no function
shares its dotted name with a module (``dpfast.diffgen`` is the function, its package is
``dpfast.methods.diffgen``).
"""
