"""``halfmq`` command line: topics, transactions, consumers, test messages, and offline store tools.

    halfmq [--url URL] [--token TOKEN] [--json] <resource> <action> ...

Human tables by default, ``--json`` for scripts. Exit code 0 on success, 1 when the broker
refuses the request (the error code is printed), 2 on a usage error or an unreachable broker.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from halfmq_cli import store as store_tools
from halfmq_cli.client import AdminClient, AdminError
from halfmq_peers.jvm import PeerFailed


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as an aligned text table with a header line."""
    cells = [[str(row.get(c, "")) if row.get(c) is not None else "-" for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines) if rows else lines[0] + "\n(none)"


DEFAULT_URL = "http://127.0.0.1:8080"
_DUE = ("next_check", "discard")


def _transaction_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Times to come as seconds from the broker's now (its epoch-ms times less the item's age)."""
    rows = []
    for t in items:
        now_ms = t["half_stored_at"] + t["age_seconds"] * 1000
        due = {
            name: t[f"{name}_at"] and f"in {(t[f'{name}_at'] - now_ms) / 1000:.1f}s"
            for name in ("next_check", "discard")
        }
        rows.append({**t, "age": f"{t['age_seconds']:.1f}s", **due})
    return rows


TXN_COLUMNS = (
    "transaction_id", "state", "producer_group", "topic", "age", "check_times", "next_check", "discard", "orphaned",
)  # fmt: skip


KAFKA_TXN_COLUMNS = (
    "transactional_id", "epoch", "txn_number", "state", "aborted_by", "age", "messages", "offsets", "committed",
    "aborted",
)  # fmt: skip


def run(args: argparse.Namespace, client: AdminClient) -> tuple[Any, str]:
    """Carry out the command; return (JSON result, human text)."""
    resource, action = args.resource, args.action
    if resource == "messages" or action in OPERATOR_ACTIONS:
        return operate(args, client)
    if resource == "topics":
        if action == "list":
            page = client.get("/topics", limit=1000)
            return page, table(
                page["items"], ("name", "queues", "retention_seconds", "message_type", "delayed", "next_due")
            )
        if action == "create":
            created = client.post(
                "/topics",
                {
                    "name": args.name,
                    "queues": args.queues,
                    "retention_seconds": args.retention,
                    "message_type": args.type,
                },
            )
            kept = created["retention_seconds"]
            retention = (
                "the broker's retention" if kept is None else f"retention {kept:g} s" if kept else "kept forever"
            )
            return (
                created,
                f"topic {args.name} {'created' if created['created'] else 'already exists'}"
                f" ({args.queues} queues, {retention})",
            )
        queues = client.get(f"/topics/{args.name}/queues")
        return queues, table(queues, ("queue_id", "min_offset", "max_offset"))
    if resource == "transactions":
        if action == "list":
            page = client.get("/transactions", state=args.state, limit=args.limit, offset=args.offset)
            text = table(_transaction_rows(page["items"]), TXN_COLUMNS)
            return page, f"{text}\n{page['total']} {args.state.lower()} in all"
        if action == "show":
            detail = client.get(f"/transactions/{args.id}")
            fields = "\n".join(f"{k}: {v}" for k, v in detail.items() if k != "checks")
            checks = table(detail["checks"], ("check_no", "checked_at", "client_id"))
            return detail, f"{fields}\nchecks:\n{checks}"
        result = client.post(f"/transactions/{args.id}/{action}")
        return result, f"transaction {args.id} is {result['state']}"
    if resource == "transactional-ids":
        if action == "show":
            detail = client.get(f"/transactional-ids/{args.id}")
            return detail, "\n".join(f"{k}: {v}" for k, v in detail.items())
        page = client.get("/transactional-ids", state=args.state, limit=args.limit, offset=args.offset)
        rows = [{**t, "age": t["age_seconds"] and f"{t['age_seconds']:.1f}s"} for t in page["items"]]
        return page, f"{table(rows, KAFKA_TXN_COLUMNS)}\n{page['total']} in all"
    if resource == "consumers" and action == "retry-policy":
        path = f"/consumers/{urllib.parse.quote(args.group, safe='')}/retry-policy"
        if args.max_attempts is None and args.backoff is None and args.fifo is None:
            policy = client.get(path)
        else:
            backoff = None if args.backoff is None else [float(step) for step in args.backoff.split(",")]
            fifo = client.get(path)["fifo"] if args.fifo is None else args.fifo  # kept unless given
            body = {"max_attempts": args.max_attempts, "backoff_seconds": backoff, "fifo": fifo}
            policy = client.put(path, body)
        steps = ", ".join(f"{step:g}" for step in policy["backoff_seconds"])
        kind = "FIFO" if policy["fifo"] else "concurrent"
        return policy, (
            f"{policy['group']} ({kind}): {policy['max_attempts']} deliveries at most,"
            f" then {policy['dead_letter_topic']};"
            f" backoff {steps} s; retrying {policy['retrying']}, dead letters {policy['dead_letters']}"
        )
    if resource == "consumers" and action == "retries":
        counts = client.get("/consumers/retries")
        return counts, table(counts, ("group", "retrying", "dead_letters"))
    if resource == "clients":
        connected = client.get("/clients")
        return connected, table(connected, ("protocol", "group", "role", "client_id", "address"))
    if resource == "consumers" and action == "kafka-groups":
        groups = client.get("/kafka-groups")
        members = [
            {"group": g["name"], "state": g["state"], "generation": g["generation"], "member": m["member_id"],
             "host": m["client_host"], "partitions": " ".join(m["assigned"])}
            for g in groups for m in g["members"] or [{"member_id": "-", "client_host": "", "assigned": []}]
        ]  # fmt: skip
        return groups, table(members, ("group", "state", "generation", "member", "host", "partitions"))
    if resource == "consumers":
        rows = client.get("/consumers", limit=1000)["items"]
        if action == "lag":
            lag: dict[tuple[str, str], int] = {}
            for row in rows:
                lag[(row["group"], row["topic"])] = lag.get((row["group"], row["topic"]), 0) + row["lag"]
            summary = [{"group": g, "topic": t, "lag": n} for (g, t), n in sorted(lag.items())]
            return summary, table(summary, ("group", "topic", "lag"))
        return rows, table(rows, ("group", "topic", "queue_id", "offset", "max_offset", "lag"))
    bodies = [args.body] if args.body is not None else [line.rstrip("\n") for line in sys.stdin]
    path = f"/topics/{_quoted(args.topic)}/messages"
    receipts = [client.post(path, {"body": body, "keys": args.key, "tags": args.tags}) for body in bodies]
    said = [f"sent {r['message_id']} to {r['topic']}/{r['queue_id']} at offset {r['queue_offset']}" for r in receipts]
    return (receipts[0] if args.body is not None else receipts), "\n".join(said)


OPERATOR_ACTIONS = ("reset-offsets", "delete", "resend-dead-letters")  # of consumers, and topics delete
FOUND_COLUMNS = ("state", "topic", "queue_id", "queue_offset", "message_id", "keys", "tags", "stored_at", "body")


def _found_rows(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**f, "keys": " ".join(f["keys"]), "body": f["body"][:40]} for f in found]


def operate(args: argparse.Namespace, client: AdminClient) -> tuple[Any, str]:
    """The operator's commands: find and trace messages, reset, delete and resend for a group."""
    if args.resource == "messages" and args.action == "find":
        if args.id is not None:
            found = client.get(f"/messages/{_quoted(args.id)}")
        elif args.key is not None:
            found = client.get("/messages", key=args.key, limit=args.limit)
        else:
            found = client.get(f"/topics/{_quoted(args.topic)}/messages", since=args.since, until=args.until,
                               limit=args.limit)  # fmt: skip
        return found, table(_found_rows(found), FOUND_COLUMNS)
    if args.resource == "messages":
        trace = client.get(f"/messages/{_quoted(args.id)}/trace")
        lines = [table(_found_rows(trace["found"]), FOUND_COLUMNS)]
        if trace["transaction"] is not None:
            txn = trace["transaction"]
            lines.append(f"transaction {txn['transaction_id']} of {txn['producer_group']}: {txn['state']},"
                         f" {txn['check_times']} check(s)")  # fmt: skip
        groups = [{**g, "copies": " ".join(f"{c['topic']}/{c['queue_offset']}" for c in g["copies"])}
                  for g in trace["groups"]]  # fmt: skip
        lines.append(table(groups, ("group", "state", "attempts", "copies")))
        return trace, "\n".join(lines)
    if args.resource == "topics":
        client.delete(f"/topics/{_quoted(args.name)}")
        return {"topic": args.name, "deleted": True}, f"topic {args.name} deleted"
    group = f"/consumers/{_quoted(args.group)}"
    if args.action == "delete":
        client.delete(group)
        return {"group": args.group, "deleted": True}, f"consumer group {args.group} deleted"
    if args.action == "resend-dead-letters":
        sent = client.post(f"{group}/dead-letters/resend", {"message_id": args.id})
        return sent, f"{len(sent)} dead letter(s) of {args.group} sent again\n" + table(
            sent, ("message_id", "topic", "queue_id", "queue_offset")
        )
    to, value = args.to
    body = {"topic": args.topic, "to": to, "offset": value if to == "OFFSET" else None,
            "timestamp": value if to == "DATETIME" else None}  # fmt: skip
    reset = client.post(f"{group}/reset-offsets", body)
    rows = [{"queue_id": q, "offset": o} for q, o in reset["offsets"].items()]
    return reset, f"{args.group} on {args.topic}:\n" + table(rows, ("queue_id", "offset"))


TAIL_POLL = 0.5  # seconds between looks at a topic that had nothing new


def tail(args: argparse.Namespace, client: AdminClient, out: Callable[[str], None]) -> None:
    """Print each message of a topic committed from now on (or from each queue's oldest), queue
    by queue in offset order, one line each (a JSON object with ``--json``), until interrupted."""
    topic = _quoted(args.name)
    queues = client.get(f"/topics/{topic}/queues")
    offsets = {q["queue_id"]: q["min_offset" if args.from_beginning else "max_offset"] for q in queues}
    while True:
        printed = 0
        for queue_id, offset in offsets.items():
            try:
                read = client.get(f"/topics/{topic}/queues/{queue_id}/messages", offset=offset, limit=1000)
            except AdminError as exc:
                if exc.code != "OFFSET_OUT_OF_RANGE":
                    raise
                low = client.get(f"/topics/{topic}/queues")[queue_id]["min_offset"]  # retention went past it
                offsets[queue_id] = low
                continue
            for m in read["messages"]:
                out(json.dumps(m) if args.json else _tail_line(m))
            printed += len(read["messages"])
            offsets[queue_id] = read["next_offset"]
        sys.stdout.flush()
        if not printed:
            time.sleep(TAIL_POLL)


def _tail_line(m: dict[str, Any]) -> str:
    properties = " ".join(f"{k}={v}" for k, v in sorted(m["properties"].items()))
    return (f"{m['topic']}/{m['queue_id']}@{m['queue_offset']} keys={','.join(m['keys'])} tags={m['tags']}"
            f" {properties} {m['body']}".rstrip())  # fmt: skip


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def epoch_ms(text: str) -> int:
    """An ISO 8601 time (local time when it names no zone) as epoch milliseconds."""
    try:
        return round(datetime.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r} (e.g. 2026-11-28T09:30:00)") from None


# The admin API's flags, which the offline store tools refuse.
CONNECTION_FLAGS = ("url", "token", "ca")


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)  # before or after the subcommand
    common.add_argument(
        "--url", default=argparse.SUPPRESS, help=f"admin API URL (default: $HALFMQ_URL or {DEFAULT_URL})"
    )
    common.add_argument(
        "--token", default=argparse.SUPPRESS, help="the broker's auth token (default: $HALFMQ_AUTH_TOKEN)"
    )
    common.add_argument(
        "--ca",
        default=argparse.SUPPRESS,
        help="PEM file of the CA that signed the broker's certificate (with an https:// --url)",
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON, not tables")
    root = argparse.ArgumentParser(
        prog="halfmq", description="Operate a halfmq broker through its admin API.", parents=[common]
    )
    resources = root.add_subparsers(dest="resource", required=True)

    def command(group: Any, name: str, offline: bool = False, **kwargs: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = group.add_parser(name, parents=[] if offline else [common], **kwargs)
        return parser

    topics = command(resources, "topics", help="list, create and inspect topics").add_subparsers(
        dest="action", required=True
    )
    command(topics, "list", help="list topics")
    create = command(topics, "create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--queues", type=int, default=4, help="queues of the topic (default 4)")
    create.add_argument(
        "--retention", type=float, help="seconds its committed messages are kept (0: forever; default: the broker's)"
    )
    create.add_argument(
        "--type",
        choices=["NORMAL", "FIFO", "DELAY", "TRANSACTION"],
        help="the one message type it accepts (default: every type)",
    )
    command(topics, "offsets", help="per-queue offsets of a topic").add_argument("name")
    command(
        topics, "delete", help="delete a topic and its messages, offsets and segments (refused while one is pending)"
    ).add_argument("name")
    tail = command(topics, "tail", help="print a topic's new messages as they come, until Ctrl-C")
    tail.add_argument("name")
    tail.add_argument("--from-beginning", action="store_true", help="from each queue's oldest message, not its end")

    txns = command(resources, "transactions", help="half messages and operator actions").add_subparsers(
        dest="action", required=True
    )
    listing = command(txns, "list", help="list transactions of one state")
    listing.add_argument("--state", default="PENDING", choices=["PENDING", "COMMITTED", "ROLLED_BACK", "DISCARDED"])
    listing.add_argument("--limit", type=int, default=100, help="at most this many, oldest first (default 100)")
    listing.add_argument("--offset", type=int, default=0, help="skip this many first (default 0)")
    for action, text in (
        ("show", "one transaction and its checks"),
        ("commit", "commit a pending transaction"),
        ("rollback", "roll back a pending transaction"),
        ("resume", "make a discarded transaction pending again"),
    ):
        command(txns, action, help=text).add_argument("id")

    kafka_txns = command(
        resources, "transactional-ids", help="Kafka-model producers: epochs and their transactions"
    ).add_subparsers(dest="action", required=True)
    ids = command(kafka_txns, "list", help="list transactional ids and their current or last transaction")
    ids.add_argument("--state", choices=["READY", "OPEN", "COMMITTED", "ABORTED"], help="only those in this state")
    ids.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    ids.add_argument("--offset", type=int, default=0, help="skip this many first (default 0)")
    command(kafka_txns, "show", help="one transactional id").add_argument("id")

    consumers = command(resources, "consumers", help="consumer offsets and lag").add_subparsers(
        dest="action", required=True
    )
    command(consumers, "offsets", help="committed offset per group, topic and queue")
    command(consumers, "lag", help="total lag per group and topic")
    command(consumers, "retries", help="groups retrying messages or holding dead letters: how many of each")
    command(consumers, "kafka-groups", help="consumer groups of Kafka clients: state and live members")
    policy = command(
        consumers, "retry-policy", help="a group's deliveries before its dead-letter topic, and backoff; set with flags"
    )
    policy.add_argument("group")
    policy.add_argument("--max-attempts", type=int, help="deliveries of a message before it goes to %%DLQ%%<group>")
    policy.add_argument("--backoff", help="seconds before each redelivery, comma-separated; the last repeats")
    policy.add_argument(
        "--fifo",
        action=argparse.BooleanOptionalAction,
        help="a FIFO group gets one message of a message group at a time (--no-fifo: concurrent, the default)",
    )

    for action, text in (
        ("delete", "forget a group's offsets, deliveries and retry policy (refused while it has live consumers)"),
        ("resend-dead-letters", "send a group's dead letters back to their original topics as new messages"),
    ):
        command(consumers, action, help=text).add_argument("group")
    resend = consumers.choices["resend-dead-letters"]
    resend.add_argument("--id", help="only the dead letter of this original message id")
    reset = command(
        consumers, "reset-offsets", help="move a group's offsets in a topic (refused while it has live consumers)"
    )
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", dest="to", action="store_const", const=("EARLIEST", None))
    to.add_argument("--to-latest", dest="to", action="store_const", const=("LATEST", None))
    to.add_argument("--to-offset", dest="to", type=lambda n: ("OFFSET", int(n)), metavar="N",
                    help="this offset, kept within each queue's range")  # fmt: skip
    to.add_argument("--to-datetime", dest="to", type=lambda t: ("DATETIME", epoch_ms(t)), metavar="ISO",
                    help="the first message stored at or after this time")  # fmt: skip

    messages = command(resources, "messages", help="find messages and trace where one went").add_subparsers(
        dest="action", required=True
    )
    find = command(messages, "find", help="messages held or stored, newest first")
    by = find.add_mutually_exclusive_group(required=True)
    by.add_argument("--id", help="a message id")
    by.add_argument("--key", help="a key, in any topic")
    by.add_argument("--topic", help="a topic's messages (with --since and --until)")
    find.add_argument("--since", type=epoch_ms, metavar="TIME", help="stored at or after (ISO 8601)")
    find.add_argument("--until", type=epoch_ms, metavar="TIME", help="stored before (ISO 8601; default now)")
    find.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    command(messages, "trace", help="where a message went: held, stored, each group's deliveries").add_argument("id")

    command(resources, "clients", help="the clients connected now, by protocol and group").set_defaults(action="list")

    send = command(resources, "send", help="send a normal test message, or each line of stdin as one")
    send.add_argument("topic")
    send.add_argument("body", nargs="?", help="the message's body (default: each line of stdin is one message)")
    send.add_argument("--key", action="append", default=[])
    send.add_argument("--tags", default="")
    send.set_defaults(action="send")

    store = command(resources, "store", offline=True, help="offline tools on a data directory (no broker needed)")
    store_actions = store.add_subparsers(dest="action", required=True)
    command(store_actions, "inspect", offline=True, help="schema version, file size, rows per table").add_argument(
        "dir", type=Path
    )
    exporting = command(store_actions, "export", offline=True, help="the committed messages of a topic, to stdout")
    exporting.add_argument("dir", type=Path)
    exporting.add_argument("--topic", required=True)
    exporting.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    command(store_actions, "compact", offline=True, help="VACUUM the store; the broker must be stopped").add_argument(
        "dir", type=Path
    )
    peers = command(resources, "peers", offline=True, help="the real brokers: Apache RocketMQ 5 and Apache Kafka")
    peer_actions = peers.add_subparsers(dest="action", required=True)
    peer = command(
        peer_actions,
        "run",
        offline=True,
        help="start one (fetched from Maven Central once), print its endpoints as one JSON line once it answers,"
        " stop it on SIGTERM or Ctrl-C",
    )
    peer.add_argument("name", choices=["rocketmq", "kafka"])
    peer.add_argument("--workdir", type=Path, help="its data and logs (default: a temporary folder, removed after)")
    peer.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting (RocketMQ's broker.conf, or its rmq-proxy.json as proxy.KEY; Kafka's"
        " server.properties); repeatable",
    )
    peer.add_argument("--exit-with", type=int, metavar="PID", help="also stop when this process ends")
    return root


def run_peer(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    """``peers run``: the real broker in the foreground."""
    from halfmq_peers.run import run as run_peer_process

    config = dict(setting.partition("=")[::2] for setting in args.config)
    if args.workdir is not None:
        run_peer_process(args.name, args.workdir, config, exit_with=args.exit_with, out=out)
        return
    with tempfile.TemporaryDirectory(prefix=f"halfmq-{args.name}-") as workdir:
        run_peer_process(args.name, Path(workdir), config, exit_with=args.exit_with, out=out)


def run_store(args: argparse.Namespace, out: Callable[[str], None]) -> None:
    """The ``store`` tools: they open the data directory themselves, not the admin API."""
    if args.action == "export":
        store_tools.export(args.dir, args.topic, args.format, sys.stdout.write)
        return
    result = store_tools.inspect(args.dir) if args.action == "inspect" else store_tools.compact(args.dir)
    out(json.dumps(result, indent=2))


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> None:
    try:
        _main(argv, out)
    except BrokenPipeError:  # the reader left (``| head``): end quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        sys.exit(1)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, with the defaults of the global flags (which may come anywhere) filled in."""
    cli = parser()
    args = cli.parse_args(argv)
    given = vars(args)
    if args.resource in ("store", "peers") and any(flag in given for flag in CONNECTION_FLAGS):
        cli.error(f"halfmq {args.resource} works without a broker: --url, --token and --ca do not apply")
    if args.resource == "peers" and any("=" not in setting for setting in args.config):
        cli.error("--config takes KEY=VALUE")
    given.setdefault("url", os.environ.get("HALFMQ_URL", DEFAULT_URL))
    given.setdefault("token", os.environ.get("HALFMQ_AUTH_TOKEN"))
    given.setdefault("ca", None)
    given.setdefault("json", False)
    return args


def _main(argv: Sequence[str] | None, out: Callable[[str], None]) -> None:
    args = parse(argv)
    if args.resource == "peers":
        try:
            run_peer(args, out)
        except PeerFailed as exc:
            print(f"halfmq: {exc}", file=sys.stderr)
            sys.exit(1)
        return
    if args.resource == "store":
        try:
            run_store(args, out)
        except store_tools.StoreToolError as exc:
            print(f"halfmq: {exc}", file=sys.stderr)
            sys.exit(1)
        return
    if args.resource == "topics" and args.action == "tail":
        try:
            tail(args, AdminClient(args.url, args.token, ca=args.ca), out)
        except AdminError as exc:
            print(f"halfmq: {exc}", file=sys.stderr)
            sys.exit(2 if exc.code in ("UNREACHABLE", "BAD_CA") else 1)
        except KeyboardInterrupt:
            pass
        return
    try:
        result, text = run(args, AdminClient(args.url, args.token, ca=args.ca))
    except AdminError as exc:
        print(f"halfmq: {exc}", file=sys.stderr)
        sys.exit(2 if exc.code in ("UNREACHABLE", "BAD_CA") else 1)
    out(json.dumps(result, indent=2) if args.json else text)
