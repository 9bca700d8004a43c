"""Files of many changes, checked whole before anything is written: the DDI import
(ddi_import.py, and the page's two steps in import_previews.py) and the history backfill
(history_import.py). Writes through the change path; uses records/ for the record kinds and
billing/ for closed months."""
