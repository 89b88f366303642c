"""The link offerings a plan can be priced with: the files of data/links/ (inputs/catalog.py
LinkOffering: bandwidth, a fixed $/month, a $/GB, RTT, each price with its provenance) and
`owned`, a link already owned, which costs nothing more to use.

`link_offering_for` is the one way from an offering's name to its LinkOffering for every
command that buys a link (optimize and evaluate through inputs/pricing.py; procure's sites).

Units: Gbps (10^9 bit/s), USD per month and per GB, ms, as in the files.
"""

from prfaas_plan import plausible, units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.catalog_files import OWNED_LINK, LinkOffering, Provenance

__all__ = ["OWNED_LINK", "link_offering_for", "owned_link"]
OWNED_LINK_RTT_MS = 0.0  # the scenario states no RTT: see owned_link


def owned_link(bandwidth_gbps: float) -> LinkOffering:
    """A link already owned, of `bandwidth_gbps` (the scenario's own link.bandwidth_gbps): its
    capital is sunk, so it adds 0 USD a month and 0 USD a GB to a plan. Its RTT is 0 ms: a
    scenario gives the link's bandwidth, not its RTT, and the analytic model (optimize,
    evaluate) uses none; where an RTT matters (procure's TTFT, simulate) give the sites' own
    (procurement.sites[].rtt_ms, --link-latency-s)."""
    return LinkOffering(
        name=OWNED_LINK,
        description="a link already owned: no marginal cost",
        bandwidth_gbps=bandwidth_gbps,
        monthly_usd=0.0,
        usd_per_gb=0.0,
        rtt_ms=OWNED_LINK_RTT_MS,
        prices=Provenance(
            basis="estimate",
            source="link_offering: owned (the scenario's own link)",
            date="2026-12-04",
            note="owned, so priced at its marginal cost, zero: its purchase or lease is sunk",
        ),
        rtt=Provenance(
            basis="unknown",
            source="link_offering: owned",
            date="2026-12-04",
            note="a scenario gives no RTT: 0 ms; give procurement.sites[].rtt_ms for procure",
        ),
    )


def link_offering_for(
    catalog: Catalog,
    name: str,
    *,
    owned_gbps: float,
    carry_bytes_per_s: float | None = None,
    where: str = "",
    parameter: str | None = None,
) -> LinkOffering:
    """The offering called `name`: `owned` is a zero-cost link of `owned_gbps` (the scenario's
    link.bandwidth_gbps), any other name a file of data/links/. With `carry_bytes_per_s` (the
    link bandwidth the plan assumes), an offering narrower than that is refused: a ConfigError
    naming both bandwidths (tagged `link_offering`). `where` prefixes, and `parameter` tags, an
    unknown name's error."""
    known = catalog.link_offering_names()
    if name == OWNED_LINK:
        offering = owned_link(owned_gbps)
    elif name in known:
        offering = catalog.link_offering(name, where, parameter)
    else:
        raise ConfigError(
            f"{where}unknown link offering {plausible.quoted(name)}; known: "
            f"{', '.join(known) or 'none'} ({catalog.data_dir / 'links'}/), or {OWNED_LINK!r} "
            "for a link already owned (no cost)",
            parameter=parameter,
        )
    if carry_bytes_per_s is not None and (
        units.gbps_to_bytes_per_s(offering.bandwidth_gbps) < carry_bytes_per_s
    ):
        carry_gbps = units.bytes_per_s_to_gbps(carry_bytes_per_s)
        if name == OWNED_LINK:
            raise ConfigError(
                f"link_offering {OWNED_LINK!r} is the scenario's own {owned_gbps:g} Gbps link "
                f"(link.bandwidth_gbps), less than the {carry_gbps:g} Gbps link the plan assumes "
                f"(bandwidth_gbps); plan with bandwidth_gbps at most {owned_gbps:g}, or set "
                "link.bandwidth_gbps to the link you own",
                parameter="link_offering",
            )
        raise ConfigError(
            f"link_offering {name!r} carries {offering.bandwidth_gbps:g} Gbps, less than the "
            f"{carry_gbps:g} Gbps link the plan assumes (link.bandwidth_gbps); choose a wider "
            f"offering or model this one with `bandwidth_gbps` {offering.bandwidth_gbps:g}",
            parameter="link_offering",
        )
    return offering
