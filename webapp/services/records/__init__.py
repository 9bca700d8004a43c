"""DDIs and phone users: their kinds (kinds.py), the one read (record_query.py) and the list
pages' paging on it (listing.py, landing.py), create / update / delete (crud.py), what only
DDIs have (ddis.py: link, number blocks), bulk actions (bulk.py) and a DDI's own page
(ddi_timeline.py). Every write goes through the change path (services/changes.py); uses
history/ for what it reads back, nothing above."""
