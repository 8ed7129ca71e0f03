"""Settings, ids, domain records, errors and the command line."""
