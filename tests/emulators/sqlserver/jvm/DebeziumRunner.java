// Runs a Debezium connector (here: Debezium's own SQL Server connector) in Debezium's embedded
// engine and writes every record it emits as one JSON line, the same line format as the
// PostgreSQL golden files (shared/tools/debezium_oracle.py):
//   {"topic":"<destination>","key":<key JSON|null>,"value":<value JSON|null>,"headers":[{"key":k,"value":<JSON>}]}
// key/value/header values are the exact text of Kafka's JsonConverter (schemas included unless
// the properties say otherwise), embedded verbatim.
//
// Run (single-file source launch):
//   java -cp '<jars>/*' DebeziumRunner.java PROPS OUT.jsonl [--max-events N] [--idle-timeout S]
//        [--startup-timeout S] [--append]
// PROPS: a java.util.Properties file with the connector's and the engine's properties. Defaults
//   (kept when PROPS sets them): name=dbz-sqlserver-runner, connector.class=SqlServerConnector,
//   offset.storage=FileOffsetBackingStore (offset.storage.file.filename is then required, so a
//   second run with the same file resumes), offset.flush.interval.ms=0, and schemas enabled for
//   the key, value and header converters.
// Stops when N records were written (--max-events), when no record came for S seconds after the
// snapshot completed or streaming started (--idle-timeout), when a line "stop" arrives on stdin,
// or when the engine ends by itself. Offsets are committed when it stops.
//
// STDOUT carries status lines only (the engine logs to stderr), one JSON object each:
//   {"status":"started"} {"status":"snapshot-completed"} {"status":"streaming-connected"}
//   {"status":"stopping","reason":"max-events|idle|stdin|startup-timeout"}
//   {"status":"finished","events":N,"success":true|false,"message":...,"error":...}
// Exit: 0 ok, 2 usage, 3 the engine or connector failed (its exception on stderr and in
// "error"), 4 neither snapshot nor streaming started within --startup-timeout (default 300 s).

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.Header;
import io.debezium.engine.format.Json;
import io.debezium.engine.format.KeyValueHeaderChangeEventFormat;

public class DebeziumRunner {

    static final int EXIT_USAGE = 2;
    static final int EXIT_FAILED = 3;
    static final int EXIT_STARTUP_TIMEOUT = 4;

    public static void main(String[] args) throws Exception {
        Options options;
        try {
            options = Options.parse(args);
        }
        catch (IllegalArgumentException e) {
            System.err.println("DebeziumRunner: " + e.getMessage());
            System.err.println("usage: DebeziumRunner PROPS OUT.jsonl [--max-events N] [--idle-timeout S] "
                    + "[--startup-timeout S] [--append]");
            System.exit(EXIT_USAGE);
            return;
        }
        Properties props = new Properties();
        try (var in = Files.newBufferedReader(options.props, StandardCharsets.UTF_8)) {
            props.load(in);
        }
        applyDefaults(props);
        if ("org.apache.kafka.connect.storage.FileOffsetBackingStore".equals(props.getProperty("offset.storage"))
                && props.getProperty("offset.storage.file.filename", "").isEmpty()) {
            System.err.println("DebeziumRunner: offset.storage.file.filename is required with the file offset store");
            System.exit(EXIT_USAGE);
        }
        System.exit(new DebeziumRunner(options, props).run());
    }

    static void applyDefaults(Properties props) {
        props.putIfAbsent("name", "dbz-sqlserver-runner");
        props.putIfAbsent("connector.class", "io.debezium.connector.sqlserver.SqlServerConnector");
        props.putIfAbsent("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        // commit after every batch: a stop at any time leaves offsets that match the output file
        props.putIfAbsent("offset.flush.interval.ms", "0");
        props.putIfAbsent("key.converter.schemas.enable", "true");
        props.putIfAbsent("value.converter.schemas.enable", "true");
        props.putIfAbsent("header.converter.schemas.enable", "true");
    }

    private final Options options;
    private final Properties props;
    private final AtomicLong events = new AtomicLong();
    private final AtomicLong lastEventNanos = new AtomicLong(System.nanoTime());
    private final CountDownLatch completed = new CountDownLatch(1);
    private final AtomicReference<Completion> completion = new AtomicReference<>();
    private volatile String stopRequest;

    DebeziumRunner(Options options, Properties props) {
        this.options = options;
        this.props = props;
    }

    record Completion(boolean success, String message, Throwable error) {
    }

    int run() throws Exception {
        StandardOpenOption[] mode = options.append
                ? new StandardOpenOption[]{ StandardOpenOption.CREATE, StandardOpenOption.APPEND }
                : new StandardOpenOption[]{ StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                        StandardOpenOption.WRITE };
        try (BufferedWriter out = Files.newBufferedWriter(options.out, StandardCharsets.UTF_8, mode)) {
            DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine
                    .create(KeyValueHeaderChangeEventFormat.of(Json.class, Json.class, Json.class))
                    .using(props)
                    .notifying((records, committer) -> {
                        synchronized (out) {
                            for (ChangeEvent<String, String> r : records) {
                                try {
                                    out.write(line(r));
                                    out.write('\n');
                                }
                                catch (IOException e) {
                                    throw new IllegalStateException("cannot write " + options.out, e);
                                }
                                events.incrementAndGet();
                                lastEventNanos.set(System.nanoTime());
                                committer.markProcessed(r);
                            }
                            try {
                                out.flush();
                            }
                            catch (IOException e) {
                                throw new IllegalStateException("cannot write " + options.out, e);
                            }
                        }
                        committer.markBatchFinished();
                    })
                    .using((success, message, error) -> {
                        completion.set(new Completion(success, message, error));
                        completed.countDown();
                    })
                    .build();
            status("{\"status\":\"started\"}");
            ExecutorService executor = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "debezium-engine");
                t.setDaemon(true);
                return t;
            });
            executor.execute(engine);
            watchStdin();
            int exit = supervise(engine);
            executor.shutdown();
            executor.awaitTermination(30, TimeUnit.SECONDS);
            synchronized (out) {
                out.flush();
            }
            Completion c = completion.get();
            boolean success = c != null && c.success() && c.error() == null;
            StringBuilder line = new StringBuilder("{\"status\":\"finished\",\"events\":").append(events.get())
                    .append(",\"success\":").append(success)
                    .append(",\"message\":").append(quote(c == null ? "engine did not complete" : c.message()))
                    .append(",\"error\":").append(quote(c == null || c.error() == null ? null : describe(c.error())))
                    .append('}');
            status(line.toString());
            if (c != null && c.error() != null) {
                StringWriter trace = new StringWriter();
                c.error().printStackTrace(new PrintWriter(trace));
                System.err.println("DebeziumRunner: the engine failed: " + c.message());
                System.err.println(trace);
            }
            if (exit != 0) {
                return exit;
            }
            return success ? 0 : EXIT_FAILED;
        }
    }

    /** Waits for a reason to stop, stops the engine, and returns the exit code so far. */
    private int supervise(DebeziumEngine<?> engine) throws Exception {
        long start = System.nanoTime();
        boolean snapshotDone = false;
        boolean streaming = false;
        long readySince = 0;
        String reason = null;
        int exit = 0;
        while (completed.getCount() > 0) {
            if (!snapshotDone && metric("snapshot", "SnapshotCompleted")) {
                snapshotDone = true;
                status("{\"status\":\"snapshot-completed\"}");
            }
            if (!streaming && metric("streaming", "Connected")) {
                streaming = true;
                status("{\"status\":\"streaming-connected\"}");
            }
            if ((snapshotDone || streaming) && readySince == 0) {
                readySince = System.nanoTime();
            }
            long now = System.nanoTime();
            if (stopRequest != null) {
                reason = stopRequest;
            }
            else if (options.maxEvents > 0 && events.get() >= options.maxEvents) {
                reason = "max-events";
            }
            else if (readySince == 0 && now - start > TimeUnit.SECONDS.toNanos(options.startupTimeout)) {
                reason = "startup-timeout";
                exit = EXIT_STARTUP_TIMEOUT;
            }
            else if (readySince != 0 && options.idleTimeout > 0
                    && now - Math.max(readySince, lastEventNanos.get()) > (long) (options.idleTimeout * 1e9)) {
                reason = "idle";
            }
            if (reason != null) {
                break;
            }
            completed.await(100, TimeUnit.MILLISECONDS);
        }
        if (reason != null) {
            status("{\"status\":\"stopping\",\"reason\":" + quote(reason) + "}");
            engine.close();
            if (!completed.await(60, TimeUnit.SECONDS)) {
                System.err.println("DebeziumRunner: the engine did not stop within 60 s");
                return EXIT_FAILED;
            }
        }
        return exit;
    }

    /** True when an MBean of Debezium's connector metrics in the given context reports the attribute true. */
    private static boolean metric(String context, String attribute) {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        try {
            Set<ObjectName> names = server.queryNames(
                    new ObjectName("debezium.*:type=connector-metrics,context=" + context + ",*"), null);
            boolean any = false;
            for (ObjectName name : names) {
                Object value;
                try {
                    value = server.getAttribute(name, attribute);
                }
                catch (javax.management.AttributeNotFoundException e) {
                    continue; // task-level beans of the snapshot context have no SnapshotCompleted
                }
                if (!Boolean.TRUE.equals(value)) {
                    return false; // every database (partition) must have completed
                }
                any = true;
            }
            return any;
        }
        catch (Exception e) {
            return false;
        }
    }

    private void watchStdin() {
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String l;
                while ((l = in.readLine()) != null) {
                    if (l.strip().equals("stop")) {
                        stopRequest = "stdin";
                        return;
                    }
                }
            }
            catch (IOException e) {
                // no stdin: only the other stop conditions apply
            }
        }, "stdin-watch");
        t.setDaemon(true);
        t.start();
    }

    static String line(ChangeEvent<String, String> r) {
        StringBuilder sb = new StringBuilder(256);
        sb.append("{\"topic\":").append(quote(r.destination()))
                .append(",\"key\":").append(r.key() == null ? "null" : r.key())
                .append(",\"value\":").append(r.value() == null ? "null" : r.value())
                .append(",\"headers\":[");
        List<Header<String>> headers = r.<String> headers();
        for (int i = 0; i < headers.size(); i++) {
            Header<String> h = headers.get(i);
            if (i > 0) {
                sb.append(',');
            }
            sb.append("{\"key\":").append(quote(h.getKey())).append(",\"value\":")
                    .append(h.getValue() == null ? "null" : h.getValue()).append('}');
        }
        return sb.append("]}").toString();
    }

    private static String describe(Throwable error) {
        StringBuilder sb = new StringBuilder(error.toString());
        Throwable cause = error.getCause();
        while (cause != null && cause != cause.getCause()) {
            sb.append(" <- ").append(cause);
            cause = cause.getCause();
        }
        return sb.toString();
    }

    private static synchronized void status(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String quote(String v) {
        if (v == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder(v.length() + 2).append('"');
        for (int k = 0; k < v.length(); k++) {
            char c = v.charAt(k);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    }
                    else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"').toString();
    }

    static final class Options {
        Path props;
        Path out;
        long maxEvents;
        double idleTimeout;
        long startupTimeout = 300;
        boolean append;

        static Options parse(String[] args) {
            Options o = new Options();
            int positional = 0;
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "--max-events" -> o.maxEvents = Long.parseLong(value(args, ++i, a));
                    case "--idle-timeout" -> o.idleTimeout = Double.parseDouble(value(args, ++i, a));
                    case "--startup-timeout" -> o.startupTimeout = Long.parseLong(value(args, ++i, a));
                    case "--append" -> o.append = true;
                    default -> {
                        if (a.startsWith("--")) {
                            throw new IllegalArgumentException("unknown option " + a);
                        }
                        if (positional == 0) {
                            o.props = Path.of(a);
                        }
                        else if (positional == 1) {
                            o.out = Path.of(a);
                        }
                        else {
                            throw new IllegalArgumentException("unexpected argument " + a);
                        }
                        positional++;
                    }
                }
            }
            if (positional != 2) {
                throw new IllegalArgumentException("PROPS and OUT are required");
            }
            return o;
        }

        private static String value(String[] args, int i, String option) {
            if (i >= args.length) {
                throw new IllegalArgumentException(option + " needs a value");
            }
            return args[i];
        }
    }
}
