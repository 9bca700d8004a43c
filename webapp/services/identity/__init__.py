"""Who acts: sign-in accounts and their grants (accounts.py), password sign-in and its
sessions (signin.py) and API tokens (api_tokens.py). Uses history/ for the audit of account
changes; a request's credentials become a Principal in webapp/request_auth.py."""
