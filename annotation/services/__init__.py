"""Services: every write goes through a function here, named ``<entity>_<action>``,
with keyword-only arguments and one transaction each."""
