"""Run a command with every core kept busy beside it (`python -m cpuhog`), to find flakiness before users do."""
