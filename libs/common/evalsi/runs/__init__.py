"""The run: its spec, plan, execution, driver, summaries, gates and result documents."""
