"""The sample ``inventory`` database used by ``headwater demo`` (modelled on Debezium's tutorial).

Schema ``inventory``: ``customers``, ``products``, ``products_on_hand`` and ``orders``, with 10
customers (ids from 1001), 20 products (ids from 101) and 30 orders (ids from 10001).
:class:`ChangeGenerator` then keeps changing it: new orders, stock and price updates, cancelled
orders, new customers and the odd multi-statement transaction.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import random
import threading
import time
from decimal import Decimal
from typing import Any

import psycopg2

log = logging.getLogger(__name__)

DATABASE = "inventory"  # the database the sample schema is loaded into on an embedded cluster
SCHEMA = "inventory"
TABLES = ("customers", "products", "products_on_hand", "orders")

# (first_name, last_name, email)
CUSTOMERS: tuple[tuple[str, str, str], ...] = (
    ("Sally", "Thomas", "sally.thomas@acme.com"),
    ("George", "Bailey", "gbailey@foobar.com"),
    ("Edward", "Walker", "ed@walker.com"),
    ("Anne", "Kretchmar", "annek@noanswer.org"),
    ("Ida", "Marsh", "ida.marsh@example.com"),
    ("Omar", "Haddad", "omar.haddad@example.net"),
    ("Wen", "Zhou", "wen.zhou@example.org"),
    ("Lucia", "Ferreira", "lferreira@example.com"),
    ("Tomasz", "Nowak", "tnowak@example.net"),
    ("Priya", "Raman", "priya@raman.example"),
)

# (name, description, weight, price)
PRODUCTS: tuple[tuple[str, str, float, Decimal], ...] = (
    ("scooter", "Small 2-wheel scooter", 3.14, Decimal("79.90")),
    ("car battery", "12V car battery", 8.1, Decimal("119.00")),
    ("12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8, Decimal("14.95")),
    ("hammer", "12oz carpenter's hammer", 0.75, Decimal("18.50")),
    ("hammer", "14oz carpenter's hammer", 0.875, Decimal("19.50")),
    ("hammer", "16oz carpenter's hammer", 1.0, Decimal("21.00")),
    ("rocks", "box of assorted rocks", 5.3, Decimal("9.99")),
    ("jacket", "water resistent black wind breaker", 0.1, Decimal("64.00")),
    ("spare tire", "24 inch spare tire", 22.2, Decimal("89.00")),
    ("screwdriver set", "6-piece precision screwdriver set", 0.45, Decimal("12.49")),
    ("tape measure", "25ft locking tape measure", 0.6, Decimal("11.25")),
    ("work gloves", "pair of leather work gloves", 0.3, Decimal("15.00")),
    ("ladder", "6ft aluminium step ladder", 7.5, Decimal("129.00")),
    ("flashlight", "rechargeable LED flashlight", 0.35, Decimal("24.99")),
    ("extension cord", "50ft outdoor extension cord", 2.4, Decimal("32.00")),
    ("paint brush", "set of 3 angled paint brushes", 0.25, Decimal("8.75")),
    ("wheelbarrow", "6 cubic ft steel wheelbarrow", 18.0, Decimal("149.00")),
    ("garden hose", "75ft kink-free garden hose", 4.1, Decimal("42.50")),
    ("safety glasses", "anti-fog safety glasses", 0.05, Decimal("6.99")),
    ("toolbox", "19 inch plastic toolbox", 1.9, Decimal("27.00")),
)

FIRST_CUSTOMER_ID = 1001
FIRST_PRODUCT_ID = 101
FIRST_ORDER_ID = 10001
ORDER_COUNT = 30

_DDL = """
CREATE SCHEMA inventory;

CREATE TABLE inventory.customers (
    id serial PRIMARY KEY,
    first_name varchar(255) NOT NULL,
    last_name varchar(255) NOT NULL,
    email varchar(255) NOT NULL UNIQUE
);
ALTER SEQUENCE inventory.customers_id_seq RESTART WITH 1001;

CREATE TABLE inventory.products (
    id serial PRIMARY KEY,
    name varchar(255) NOT NULL,
    description varchar(512),
    weight double precision,
    price numeric(10,2)
);
ALTER SEQUENCE inventory.products_id_seq RESTART WITH 101;

CREATE TABLE inventory.products_on_hand (
    product_id integer PRIMARY KEY REFERENCES inventory.products(id),
    quantity integer NOT NULL
);

CREATE TABLE inventory.orders (
    id serial PRIMARY KEY,
    order_date date NOT NULL,
    purchaser integer NOT NULL REFERENCES inventory.customers(id),
    quantity integer NOT NULL,
    product_id integer NOT NULL REFERENCES inventory.products(id),
    created_at timestamptz NOT NULL DEFAULT now()
);
ALTER SEQUENCE inventory.orders_id_seq RESTART WITH 10001;
"""


def customer_ids() -> list[int]:
    return list(range(FIRST_CUSTOMER_ID, FIRST_CUSTOMER_ID + len(CUSTOMERS)))


def product_ids() -> list[int]:
    return list(range(FIRST_PRODUCT_ID, FIRST_PRODUCT_ID + len(PRODUCTS)))


def order_ids() -> list[int]:
    return list(range(FIRST_ORDER_ID, FIRST_ORDER_ID + ORDER_COUNT))


def initial_stock() -> list[tuple[int, int]]:
    """(product_id, quantity) rows of ``products_on_hand``."""
    rng = random.Random(7)
    return [(pid, rng.randint(0, 60)) for pid in product_ids()]


def sample_orders() -> list[tuple[dt.date, int, int, int]]:
    """(order_date, purchaser, quantity, product_id) rows of the initial ``orders``, deterministic."""
    rng = random.Random(42)
    start = dt.date(2016, 1, 16)
    customers, products = customer_ids(), product_ids()
    return [
        (start + dt.timedelta(days=3 * i + rng.randint(0, 2)), rng.choice(customers), rng.randint(1, 5),
         rng.choice(products))
        for i in range(ORDER_COUNT)
    ]


def sample_row_keys() -> dict[str, set[int]]:
    """The primary keys of every sample row, by table (what an initial snapshot must emit)."""
    return {
        "customers": set(customer_ids()),
        "products": set(product_ids()),
        "products_on_hand": set(product_ids()),
        "orders": set(order_ids()),
    }


def create_sample_database(conn: Any) -> None:
    """Create schema ``inventory`` with its tables and sample rows (``conn``: psycopg2, autocommit)."""
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        try:
            cur.execute(_DDL)
            cur.executemany(
                "INSERT INTO inventory.customers (first_name, last_name, email) VALUES (%s, %s, %s)", CUSTOMERS
            )
            cur.executemany(
                "INSERT INTO inventory.products (name, description, weight, price) VALUES (%s, %s, %s, %s)",
                PRODUCTS,
            )
            cur.executemany(
                "INSERT INTO inventory.products_on_hand (product_id, quantity) VALUES (%s, %s)", initial_stock()
            )
            cur.executemany(
                "INSERT INTO inventory.orders (order_date, purchaser, quantity, product_id) VALUES (%s, %s, %s, %s)",
                sample_orders(),
            )
            cur.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(psycopg2.Error):
                cur.execute("ROLLBACK")
            raise


def load_sample_database(cluster: Any, dbname: str = DATABASE) -> None:
    """Create ``dbname`` on a running embedded cluster (:class:`~headwater.embedded.postgres.ThrowawayPostgres`)
    and load the sample schema and rows into it."""
    cluster.create_database(dbname)
    conn = cluster.connect(dbname)
    try:
        create_sample_database(conn)
    finally:
        conn.close()


def sample_connector_properties(cluster: Any, dbname: str = DATABASE) -> dict[str, str]:
    """The connector properties that capture the sample schema of ``dbname`` on a running embedded
    cluster: ``connector.class`` (the PostgreSQL connector's, as it registers itself), the connection
    (host, port, user, the password when the cluster has one, database) and ``schema.include.list``."""
    from headwater.connectors.postgres.config import CONNECTOR_CLASS

    properties = {
        "connector.class": CONNECTOR_CLASS,
        "database.hostname": cluster.host,
        "database.port": str(cluster.port),
        "database.user": cluster.user,
        "database.dbname": dbname,
        "schema.include.list": SCHEMA,
    }
    if cluster.password is not None:
        properties["database.password"] = cluster.password
    return properties


_FIRST_NAMES = ("Ada", "Bo", "Carmen", "Dmitri", "Elif", "Femi", "Greta", "Hiro", "Ines", "Jonas", "Kaia", "Luis")
_LAST_NAMES = ("Abbott", "Berg", "Castro", "Dubois", "Eze", "Fischer", "Gupta", "Holm", "Ivanova", "Jensen")

# kind -> relative weight
_MIX = (
    ("new_orders", 35),
    ("quantity_updates", 25),
    ("price_changes", 12),
    ("order_deletes", 12),
    ("new_customers", 8),
    ("multi_statement", 8),
)


class ChangeGenerator:
    """A thread that runs a random mix of transactions against the sample database at ``rate`` per second.

    ``counts`` holds what was committed, by kind, plus ``transactions`` (all kinds) and ``errors``
    (transactions that failed and were rolled back). Read it from any thread (a snapshot: ``dict(g.counts)``).
    """

    def __init__(self, dsn: str, rate: float = 20.0, seed: int | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.dsn = dsn
        self.rate = rate
        self.rng = random.Random(seed)
        self.counts: dict[str, int] = {kind: 0 for kind, _ in _MIX}
        self.counts["transactions"] = 0
        self.counts["errors"] = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._customers: list[int] = []
        self._products: list[int] = []
        self._serial = 0
        self._new_customer_ids: list[int] = []  # added to _customers once their transaction commits

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ChangeGenerator:
        if self._thread is not None:
            return self
        self._conn = psycopg2.connect(self.dsn)
        self._conn.autocommit = False
        with self._conn.cursor() as cur:
            cur.execute("SELECT id FROM inventory.customers ORDER BY id")
            self._customers = [r[0] for r in cur.fetchall()]
            cur.execute("SELECT id FROM inventory.products ORDER BY id")
            self._products = [r[0] for r in cur.fetchall()]
        self._conn.commit()
        if not self._customers or not self._products:
            self._conn.close()
            raise RuntimeError("the sample database has no customers or products")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="headwater-demo-generator", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._conn is not None:
            with contextlib.suppress(psycopg2.Error):
                self._conn.close()
            self._conn = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the loop -------------------------------------------------------------------------------
    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        kinds = [k for k, _ in _MIX]
        weights = [w for _, w in _MIX]
        failures_in_a_row = 0
        while not self._stop.is_set():
            kind = self.rng.choices(kinds, weights)[0]
            try:
                with self._conn.cursor() as cur:
                    getattr(self, "_" + kind)(cur)
                self._conn.commit()
            except psycopg2.Error as exc:
                self._new_customer_ids.clear()
                self.counts["errors"] += 1
                self.last_error = f"{kind}: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
                failures_in_a_row += 1
                try:
                    self._conn.rollback()
                except psycopg2.Error:
                    log.warning("change generator stopped: %s", self.last_error)
                    return  # connection gone (server stopped)
                if failures_in_a_row >= 20:
                    log.warning("change generator stopped after repeated errors: %s", self.last_error)
                    return
            except Exception as exc:  # a bug: stop generating, but say why
                self.last_error = f"{kind}: {exc!r}"
                log.exception("change generator failed")
                return
            else:
                failures_in_a_row = 0
                self._customers.extend(self._new_customer_ids)
                self._new_customer_ids.clear()
                self.counts[kind] += 1
                self.counts["transactions"] += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            elif delay < -1.0:
                next_at = time.monotonic()  # fell behind: do not try to catch up in a burst

    # -- transaction kinds ----------------------------------------------------------------------
    def _insert_order(self, cur: Any, purchaser: int | None = None) -> int:
        product = self.rng.choice(self._products)
        quantity = self.rng.randint(1, 4)
        cur.execute(
            "INSERT INTO inventory.orders (order_date, purchaser, quantity, product_id) "
            "VALUES (current_date, %s, %s, %s) RETURNING id",
            (purchaser or self.rng.choice(self._customers), quantity, product),
        )
        order_id = cur.fetchone()[0]
        cur.execute(
            "UPDATE inventory.products_on_hand SET quantity = GREATEST(quantity - %s, 0) WHERE product_id = %s",
            (quantity, product),
        )
        return order_id

    def _new_orders(self, cur: Any) -> None:
        self._insert_order(cur)

    def _quantity_updates(self, cur: Any) -> None:
        cur.execute(
            "UPDATE inventory.products_on_hand SET quantity = GREATEST(quantity + %s, 0) WHERE product_id = %s",
            (self.rng.choice((-3, -2, -1, 5, 10, 20)), self.rng.choice(self._products)),
        )

    def _price_changes(self, cur: Any) -> None:
        factor = Decimal(self.rng.choice(("0.90", "0.95", "1.05", "1.10")))
        cur.execute(
            "UPDATE inventory.products SET price = GREATEST(round(price * %s, 2), 0.99) WHERE id = %s",
            (factor, self.rng.choice(self._products)),
        )

    def _order_deletes(self, cur: Any) -> None:
        cur.execute(
            "DELETE FROM inventory.orders WHERE id = (SELECT id FROM inventory.orders ORDER BY random() LIMIT 1)"
        )

    def _insert_customer(self, cur: Any) -> int:
        self._serial += 1
        first, last = self.rng.choice(_FIRST_NAMES), self.rng.choice(_LAST_NAMES)
        email = f"{first}.{last}.{self._serial}.{self.rng.randrange(16**6):06x}@example.com".lower()
        cur.execute(
            "INSERT INTO inventory.customers (first_name, last_name, email) VALUES (%s, %s, %s) RETURNING id",
            (first, last, email),
        )
        return cur.fetchone()[0]

    def _new_customers(self, cur: Any) -> None:
        self._new_customer_ids.append(self._insert_customer(cur))

    def _multi_statement(self, cur: Any) -> None:
        """A new customer's first orders, a restock and a price change in one transaction."""
        customer = self._insert_customer(cur)
        for _ in range(self.rng.randint(1, 3)):
            self._insert_order(cur, purchaser=customer)
        self._quantity_updates(cur)
        self._price_changes(cur)
        self._new_customer_ids.append(customer)
