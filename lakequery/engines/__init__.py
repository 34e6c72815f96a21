"""Thin engine adapters over one :class:`lakequery.scan.ScanPlan`."""
