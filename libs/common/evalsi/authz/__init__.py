"""Authorization: the action table, roles, bindings and CEL rules deciding what a Principal may do."""
