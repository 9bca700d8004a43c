"""The number inventory's own calls (`/rest/numbers/…`, `flask numbers …`; docs/numbers.md):
stock, read, reserve, release, allocate, retire. The rows and the rules every DDI writer shares
are services/inventory.py's; these modules are the doors' services above them."""
