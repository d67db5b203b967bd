"""`llmsize fleet` rows (estimate/fleet.py) as a table and as JSON (the keys scripts rely on)."""

from __future__ import annotations

from dataclasses import asdict


def fleet_to_dict(model, w, runtime, currency, rows) -> dict:
    return {"model": model.id, "runtime": runtime, "currency": currency,
            "workload": {"isl": w.isl, "osl": w.osl, "users": w.users, "rate": w.rate, "ttft_s": w.ttft_s,
                         "tpot_s": w.tpot_s},
            "rows": [asdict(r) for r in rows],
            "assumptions": ["aggregated serving; disaggregated prefill/decode not modelled yet",
                            "TTFT: one prompt's prefill alone (queueing behind other prefills not modelled)",
                            "output rate per replica = b x osl / (osl x TPOT(b) + b x prefill time)"]}


def render_fleet(model, w, runtime, currency, rows, console) -> None:
    from rich import box
    from rich.table import Table

    load = f"{w.users:,} users" if w.users is not None else f"{w.rate:g} requests/s"
    targets = ", ".join(x for x in (f"TTFT <= {w.ttft_s:g} s" if w.ttft_s else "",
                                    f"TPOT <= {w.tpot_s * 1000:.3g} ms" if w.tpot_s else "") if x) or "no targets"
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left",
              title=f"fleet: {model.name}, {w.isl:,} in / {w.osl:,} out, {load}, {targets} ({runtime}, aggregated)")
    for col in ("card", "tp", "repl.", "cards", "batch", "tok/s/GPU", "tok/s/user", "TTFT s", "TPOT ms", "kW",
                f"{currency or 'cost'}/Mtok"):
        t.add_column(col, justify="left" if col == "card" else "right", no_wrap=True)
    missing = []
    for r in rows:
        if r.replicas is None:
            missing.append(f"{r.card}: {r.why_not}")
            continue
        t.add_row(r.card, str(r.tp), f"{r.replicas:,}", f"{r.cards_total:,}", str(r.batch_per_replica),
                  f"{r.output_tok_s_per_gpu:,.0f}", f"{r.tok_s_per_user:,.1f}", f"{r.ttft_s:.2f}",
                  f"{r.tpot_s * 1000:.1f}", f"{r.watts / 1000:,.1f}" if r.watts else "-",
                  f"{r.cost_per_mtok_out:,.3f}" if r.cost_per_mtok_out is not None else "-")
    console.print(t)
    for line in missing:
        console.print(f"  no configuration: {line}")
    console.print("Cheapest first with hourly prices, else fewest cards. Speeds from the expected-speed model at each "
                  "replica's batch; TTFT is one prompt's prefill (no queueing); disaggregated serving not modelled "
                  "yet.", style="dim")
