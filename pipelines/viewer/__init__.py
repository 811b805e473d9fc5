"""The web viewer that ``bookindex serve`` serves beside the API (docs/viewer.md): a plain page
(``static/``: HTML, JavaScript, CSS, shipped in the package; nothing is fetched from elsewhere)
and the JSON and image routes it reads (``routes``), behind the same guard as the API."""
