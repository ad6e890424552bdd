"""docs/ha.md as written: its Patroni block starts the HA tests' cluster (tests/ha/cluster.py);
its multi-host store URL is read as the page says it is."""

from __future__ import annotations

import re
import shlex

from psycopg.conninfo import conninfo_to_dict

from interlock.stores.urls import STORE_CONNINFO, store_env
from tests.ha.cluster import DOC, cluster_settings


def test_the_serve_line_names_every_node_and_asks_for_the_writable_one() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert len(blocks) == 1
    argv = shlex.split(blocks[0])
    assert argv[:2] == ["interlock", "serve"]
    env = store_env(argv[argv.index("--store") + 1])
    assert conninfo_to_dict(env[STORE_CONNINFO]) == {
        "user": "interlock", "host": "pg1,pg2", "port": "5432,5432", "dbname": "interlock",
        "target_session_attrs": "read-write"}
    assert env["POSTGRES_SCHEMA"] == "interlock"


def test_the_patroni_block_is_the_one_the_page_explains() -> None:
    block = cluster_settings()
    for setting in ("synchronous_mode: true", "synchronous_mode_strict: false",
                    "primary_start_timeout: 0", "ttl: 20", "use_pg_rewind: true"):
        assert setting in block
    assert "full_page_writes" not in block
