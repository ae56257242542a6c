// Drives Microsoft's JDBC driver (mssql-jdbc) against a SQL Server (or the emulator) from a
// script, and prints everything the driver hands back as JSON lines, so Python tests can assert
// exact JDBC types and values.
//
// Run (single-file source launch, Java 11+):
//   java -cp '<jars>/*' JdbcProbe.java HOST:PORT PASSWORD SCRIPT.jsonl [URL-PROPERTIES]
//   java -cp '<jars>/*' JdbcProbe.java --parse-only SCRIPT.jsonl
// URL-PROPERTIES are appended to the JDBC URL, e.g. "databaseName=testDB;user=sa" (user defaults
// to sa, loginTimeout to 15 s; encrypt=false is always set because the emulator speaks TDS
// without TLS).
//
// SCRIPT: one JSON object per line (blank lines and lines starting with # are skipped):
//   {"op":"execute","sql":"...","params":[P...],"get":{"1":"getBytes"},"fetch_size":N}
//        no "params" -> Statement.execute (SQL batch); with "params" -> a new PreparedStatement
//   {"op":"prepare","id":"s1","sql":"..."}            keep a PreparedStatement (sp_executesql,
//   {"op":"run","id":"s1","params":[P...]}            then sp_prepexec, then sp_execute)
//   {"op":"call","sql":"{call p(?)}","params":[P...],"out":{"2":"INTEGER"}}  CallableStatement
//   {"op":"close","id":"s1"}
//   {"op":"metadata","method":"getColumns","args":["testDB","dbo","t",null]}
//        DatabaseMetaData method by name; args: strings, null, booleans, ints, string arrays
//   {"op":"autocommit","value":false}   {"op":"commit"}   {"op":"rollback"}
//   {"op":"isolation","value":"snapshot"|"read_committed"|...}   {"op":"catalog","value":"db"}
//   {"op":"savepoint","name":"sp1"}   {"op":"rollback_to","name":"sp1"}   {"op":"info"}
// P (a parameter): {"type":"int","value":1}; types: int bigint smallint tinyint bit decimal
//   real float string nstring bytes(hex) date time timestamp datetimeoffset uuid null(+sql_type)
//
// OUTPUT: one JSON object per line.
//   {"i":N,"op":"...","resultset":{"columns":[...],"rows":[[cell,...],...]}}  each result set
//   {"i":N,"op":"...","update_count":K}                                       each update count
//   {"i":N,"op":"...","error":{"class":...,"message":...,"sql_state":...,"error_code":...}}
//   {"i":N,"op":"...","warnings":[...]}   {"i":N,"op":"...","ok":true}   {"done":true}
// A column: name, label, type (java.sql.Types int), jdbc_type (JDBCType name or the driver's
// number), type_name (server type name), class, precision, scale, nullable.
// A cell: {"string": getString, "object": rendered getObject, "class": simple class name}, plus
// one entry per getter requested in "get" (column number -> getter name, e.g. "getTimestamp",
// "getBytes", "getObject:java.time.OffsetDateTime").
// Errors of a command are data (the script goes on); exit 2 for usage or connection errors.

import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.JDBCType;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Savepoint;
import java.sql.Statement;
import java.sql.Types;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public class JdbcProbe {

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("--parse-only")) {
            for (Object command : readScript(Path.of(args[1]))) {
                System.out.println(Json.write(command));
            }
            return;
        }
        if (args.length < 3 || args.length > 4) {
            System.err.println("usage: JdbcProbe HOST:PORT PASSWORD SCRIPT.jsonl [URL-PROPERTIES] | --parse-only SCRIPT.jsonl");
            System.exit(2);
        }
        List<Object> script = readScript(Path.of(args[2]));
        String url = "jdbc:sqlserver://" + args[0] + ";encrypt=false;trustServerCertificate=true";
        String extra = args.length == 4 ? args[3] : "";
        if (!extra.contains("user=")) {
            url += ";user=sa";
        }
        if (!extra.contains("loginTimeout=")) {
            // the driver retries a refused connection until this many seconds have passed
            url += ";loginTimeout=15";
        }
        if (!extra.isEmpty()) {
            url += ";" + extra;
        }
        Connection connection;
        try {
            connection = DriverManager.getConnection(url, props(args[1]));
        }
        catch (SQLException e) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("connect", url);
            line.put("error", error(e));
            System.out.println(Json.write(line));
            System.exit(2);
            return;
        }
        try (connection) {
            new JdbcProbe(connection).run(script);
        }
        System.out.println("{\"done\":true}");
    }

    private static java.util.Properties props(String password) {
        java.util.Properties p = new java.util.Properties();
        p.setProperty("password", password);
        return p;
    }

    static List<Object> readScript(Path path) throws IOException {
        List<Object> commands = new ArrayList<>();
        for (String line : Files.readAllLines(path, StandardCharsets.UTF_8)) {
            String t = line.strip();
            if (t.isEmpty() || t.startsWith("#")) {
                continue;
            }
            commands.add(Json.parse(t));
        }
        return commands;
    }

    private final Connection connection;
    private final Map<String, PreparedStatement> prepared = new HashMap<>();
    private final Map<String, Savepoint> savepoints = new HashMap<>();

    JdbcProbe(Connection connection) {
        this.connection = connection;
    }

    void run(List<Object> script) {
        int i = 0;
        for (Object raw : script) {
            @SuppressWarnings("unchecked")
            Map<String, Object> command = (Map<String, Object>) raw;
            String op = (String) command.get("op");
            Map<String, Object> head = new LinkedHashMap<>();
            head.put("i", i++);
            head.put("op", op);
            try {
                runOne(op, command, head);
            }
            catch (SQLException e) {
                Map<String, Object> line = new LinkedHashMap<>(head);
                line.put("error", error(e));
                System.out.println(Json.write(line));
            }
            catch (RuntimeException e) {
                Map<String, Object> line = new LinkedHashMap<>(head);
                Map<String, Object> err = new LinkedHashMap<>();
                err.put("class", e.getClass().getName());
                err.put("message", e.getMessage());
                line.put("error", err);
                System.out.println(Json.write(line));
            }
        }
    }

    private void runOne(String op, Map<String, Object> c, Map<String, Object> head) throws SQLException {
        Map<String, String> getters = getters(c);
        switch (op) {
            case "execute": {
                Object params = c.get("params");
                if (params == null) {
                    try (Statement st = connection.createStatement()) {
                        fetchSize(st, c);
                        boolean isResultSet = st.execute((String) c.get("sql"));
                        drain(st, isResultSet, head, getters);
                    }
                }
                else {
                    try (PreparedStatement ps = connection.prepareStatement((String) c.get("sql"))) {
                        fetchSize(ps, c);
                        bind(ps, asList(params));
                        drain(ps, ps.execute(), head, getters);
                    }
                }
                break;
            }
            case "prepare":
                prepared.put((String) c.get("id"), connection.prepareStatement((String) c.get("sql")));
                ok(head);
                break;
            case "run": {
                PreparedStatement ps = prepared.get((String) c.get("id"));
                if (ps == null) {
                    throw new IllegalArgumentException("no prepared statement " + c.get("id"));
                }
                ps.clearParameters();
                bind(ps, asList(c.getOrDefault("params", List.of())));
                drain(ps, ps.execute(), head, getters);
                break;
            }
            case "close": {
                PreparedStatement ps = prepared.remove((String) c.get("id"));
                if (ps != null) {
                    ps.close();
                }
                ok(head);
                break;
            }
            case "call": {
                try (CallableStatement cs = connection.prepareCall((String) c.get("sql"))) {
                    bind(cs, asList(c.getOrDefault("params", List.of())));
                    @SuppressWarnings("unchecked")
                    Map<String, Object> out = (Map<String, Object>) c.getOrDefault("out", Map.of());
                    for (Map.Entry<String, Object> e : out.entrySet()) {
                        cs.registerOutParameter(Integer.parseInt(e.getKey()), sqlType((String) e.getValue()));
                    }
                    drain(cs, cs.execute(), head, getters);
                    if (!out.isEmpty()) {
                        Map<String, Object> values = new LinkedHashMap<>();
                        for (String k : out.keySet()) {
                            values.put(k, render(cs.getObject(Integer.parseInt(k))));
                        }
                        Map<String, Object> line = new LinkedHashMap<>(head);
                        line.put("out", values);
                        System.out.println(Json.write(line));
                    }
                }
                break;
            }
            case "metadata":
                metadata((String) c.get("method"), asList(c.getOrDefault("args", List.of())), head, getters);
                break;
            case "autocommit":
                connection.setAutoCommit((Boolean) c.get("value"));
                ok(head);
                break;
            case "commit":
                connection.commit();
                ok(head);
                break;
            case "rollback":
                connection.rollback();
                ok(head);
                break;
            case "isolation":
                connection.setTransactionIsolation(isolation((String) c.get("value")));
                ok(head);
                break;
            case "catalog":
                connection.setCatalog((String) c.get("value"));
                ok(head);
                break;
            case "savepoint":
                savepoints.put((String) c.get("name"), connection.setSavepoint((String) c.get("name")));
                ok(head);
                break;
            case "rollback_to":
                connection.rollback(savepoints.get((String) c.get("name")));
                ok(head);
                break;
            case "info": {
                DatabaseMetaData md = connection.getMetaData();
                Map<String, Object> line = new LinkedHashMap<>(head);
                line.put("product", md.getDatabaseProductName());
                line.put("product_version", md.getDatabaseProductVersion());
                line.put("driver_version", md.getDriverVersion());
                line.put("catalog", connection.getCatalog());
                line.put("autocommit", connection.getAutoCommit());
                line.put("isolation", connection.getTransactionIsolation());
                System.out.println(Json.write(line));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    private static void fetchSize(Statement st, Map<String, Object> c) throws SQLException {
        if (c.get("fetch_size") != null) {
            st.setFetchSize(((Number) c.get("fetch_size")).intValue());
        }
    }

    @SuppressWarnings("unchecked")
    private static List<Object> asList(Object o) {
        return (List<Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, String> getters(Map<String, Object> c) {
        Map<String, String> out = new HashMap<>();
        Object g = c.get("get");
        if (g != null) {
            for (Map.Entry<String, Object> e : ((Map<String, Object>) g).entrySet()) {
                out.put(e.getKey(), (String) e.getValue());
            }
        }
        return out;
    }

    private static void ok(Map<String, Object> head) {
        Map<String, Object> line = new LinkedHashMap<>(head);
        line.put("ok", true);
        System.out.println(Json.write(line));
    }

    private void metadata(String method, List<Object> args, Map<String, Object> head, Map<String, String> getters)
            throws SQLException {
        DatabaseMetaData md = connection.getMetaData();
        for (java.lang.reflect.Method m : DatabaseMetaData.class.getMethods()) {
            if (!m.getName().equals(method) || m.getParameterCount() != args.size()) {
                continue;
            }
            Object[] values = new Object[args.size()];
            Class<?>[] types = m.getParameterTypes();
            for (int k = 0; k < values.length; k++) {
                Object a = args.get(k);
                if (types[k] == String[].class && a instanceof List) {
                    values[k] = asList(a).stream().map(x -> (String) x).toArray(String[]::new);
                }
                else if (types[k] == int.class) {
                    values[k] = ((Number) a).intValue();
                }
                else {
                    values[k] = a;
                }
            }
            Object result;
            try {
                result = m.invoke(md, values);
            }
            catch (java.lang.reflect.InvocationTargetException e) {
                if (e.getCause() instanceof SQLException) {
                    throw (SQLException) e.getCause();
                }
                throw new RuntimeException(e.getCause());
            }
            catch (IllegalAccessException e) {
                throw new RuntimeException(e);
            }
            Map<String, Object> line = new LinkedHashMap<>(head);
            if (result instanceof ResultSet) {
                try (ResultSet rs = (ResultSet) result) {
                    line.put("resultset", resultSet(rs, getters));
                }
            }
            else {
                line.put("value", render(result));
            }
            System.out.println(Json.write(line));
            return;
        }
        throw new IllegalArgumentException("no DatabaseMetaData." + method + " with " + args.size() + " arguments");
    }

    private static void drain(Statement st, boolean isResultSet, Map<String, Object> head, Map<String, String> getters)
            throws SQLException {
        warnings(st.getWarnings(), head);
        st.clearWarnings();
        while (true) {
            Map<String, Object> line = new LinkedHashMap<>(head);
            if (isResultSet) {
                try (ResultSet rs = st.getResultSet()) {
                    line.put("resultset", resultSet(rs, getters));
                }
            }
            else {
                int count = st.getUpdateCount();
                if (count == -1) {
                    break;
                }
                line.put("update_count", count);
            }
            System.out.println(Json.write(line));
            warnings(st.getWarnings(), head);
            st.clearWarnings();
            isResultSet = st.getMoreResults();
        }
    }

    private static void warnings(SQLWarning w, Map<String, Object> head) {
        if (w == null) {
            return;
        }
        List<Object> list = new ArrayList<>();
        for (; w != null; w = w.getNextWarning()) {
            list.add(error(w));
        }
        Map<String, Object> line = new LinkedHashMap<>(head);
        line.put("warnings", list);
        System.out.println(Json.write(line));
    }

    static Map<String, Object> error(SQLException e) {
        Map<String, Object> err = new LinkedHashMap<>();
        err.put("class", e.getClass().getName());
        err.put("message", e.getMessage());
        err.put("sql_state", e.getSQLState());
        err.put("error_code", e.getErrorCode());
        return err;
    }

    private static Map<String, Object> resultSet(ResultSet rs, Map<String, String> getters) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        int n = md.getColumnCount();
        List<Object> columns = new ArrayList<>();
        for (int c = 1; c <= n; c++) {
            Map<String, Object> col = new LinkedHashMap<>();
            col.put("name", md.getColumnName(c));
            col.put("label", md.getColumnLabel(c));
            col.put("type", md.getColumnType(c));
            col.put("jdbc_type", jdbcTypeName(md.getColumnType(c)));
            col.put("type_name", md.getColumnTypeName(c));
            col.put("class", md.getColumnClassName(c));
            col.put("precision", md.getPrecision(c));
            col.put("scale", md.getScale(c));
            col.put("nullable", md.isNullable(c));
            columns.add(col);
        }
        List<Object> rows = new ArrayList<>();
        while (rs.next()) {
            List<Object> row = new ArrayList<>();
            for (int c = 1; c <= n; c++) {
                Map<String, Object> cell = new LinkedHashMap<>();
                String getter = getters.get(Integer.toString(c));
                if (getter != null) {
                    // the requested getter first: some values can be read only once (streams)
                    cell.put(getter, render(read(rs, c, getter)));
                }
                cell.put("string", rs.getString(c));
                Object o = rs.getObject(c);
                cell.put("object", render(o));
                cell.put("class", o == null ? null : o.getClass().getName());
                row.add(cell);
            }
            rows.add(row);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("columns", columns);
        out.put("rows", rows);
        return out;
    }

    private static Object read(ResultSet rs, int c, String getter) throws SQLException {
        if (getter.startsWith("getObject:")) {
            try {
                return rs.getObject(c, Class.forName(getter.substring("getObject:".length())));
            }
            catch (ClassNotFoundException e) {
                throw new IllegalArgumentException(getter, e);
            }
        }
        switch (getter) {
            case "getString": return rs.getString(c);
            case "getNString": return rs.getNString(c);
            case "getObject": return rs.getObject(c);
            case "getBytes": return rs.getBytes(c);
            // primitive getters answer 0/false for NULL: report NULL as null, as wasNull() says
            case "getInt": return orNull(rs, rs.getInt(c));
            case "getLong": return orNull(rs, rs.getLong(c));
            case "getShort": return orNull(rs, rs.getShort(c));
            case "getByte": return orNull(rs, rs.getByte(c));
            case "getBoolean": return orNull(rs, rs.getBoolean(c));
            case "getBigDecimal": return rs.getBigDecimal(c);
            case "getDouble": return orNull(rs, rs.getDouble(c));
            case "getFloat": return orNull(rs, rs.getFloat(c));
            case "getTimestamp": return rs.getTimestamp(c);
            case "getDate": return rs.getDate(c);
            case "getTime": return rs.getTime(c);
            default: throw new IllegalArgumentException("unknown getter " + getter);
        }
    }

    private static Object orNull(ResultSet rs, Object value) throws SQLException {
        return rs.wasNull() ? null : value;
    }

    static String jdbcTypeName(int type) {
        try {
            return JDBCType.valueOf(type).getName();
        }
        catch (IllegalArgumentException e) {
            // the driver's own types: microsoft.sql.Types
            switch (type) {
                case -155: return "DATETIMEOFFSET";
                case -156: return "SQL_VARIANT";
                case -145: return "GUID";
                case -150: return "SMALLDATETIME";
                case -151: return "DATETIME";
                case -153: return "STRUCTURED";
                case -157: return "GEOMETRY";
                case -158: return "GEOGRAPHY";
                case -148: return "MONEY";
                case -146: return "SMALLMONEY";
                default: return Integer.toString(type);
            }
        }
    }

    /** Values as JSON: numbers stay numbers where exact, the rest as the text Java gives them. */
    static Object render(Object o) {
        if (o == null || o instanceof String || o instanceof Boolean || o instanceof Integer || o instanceof Long
                || o instanceof Short || o instanceof Byte) {
            return o;
        }
        if (o instanceof BigDecimal) {
            return Map.of("decimal", ((BigDecimal) o).toPlainString());
        }
        if (o instanceof Double || o instanceof Float) {
            return Map.of("float", o.toString());
        }
        if (o instanceof byte[]) {
            return Map.of("hex", hex((byte[]) o));
        }
        if (o instanceof java.sql.Timestamp) {
            java.sql.Timestamp t = (java.sql.Timestamp) o;
            // toString() drops trailing zeros of the nanos; keep them all for exact comparisons
            return Map.of("timestamp", t.toLocalDateTime().toString(), "nanos", t.getNanos());
        }
        return Map.of("text", o.toString(), "java", o.getClass().getName());
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(String.format("%02X", x));
        }
        return sb.toString();
    }

    private static int isolation(String name) {
        switch (name) {
            case "read_uncommitted": return Connection.TRANSACTION_READ_UNCOMMITTED;
            case "read_committed": return Connection.TRANSACTION_READ_COMMITTED;
            case "repeatable_read": return Connection.TRANSACTION_REPEATABLE_READ;
            case "serializable": return Connection.TRANSACTION_SERIALIZABLE;
            case "snapshot": return 4096; // SQLServerConnection.TRANSACTION_SNAPSHOT
            default: throw new IllegalArgumentException("unknown isolation " + name);
        }
    }

    private static int sqlType(String name) {
        switch (name) {
            case "DATETIMEOFFSET": return -155;
            case "GUID": return -145;
            default: return JDBCType.valueOf(name).getVendorTypeNumber();
        }
    }

    @SuppressWarnings("unchecked")
    static void bind(PreparedStatement ps, List<Object> params) throws SQLException {
        for (int k = 0; k < params.size(); k++) {
            Map<String, Object> p = (Map<String, Object>) params.get(k);
            int pos = k + 1;
            String type = (String) p.get("type");
            Object v = p.get("value");
            if (type.equals("null")) {
                ps.setNull(pos, sqlType((String) p.getOrDefault("sql_type", "VARCHAR")));
                continue;
            }
            if (v == null) {
                throw new IllegalArgumentException("parameter " + pos + " has no value (use type null)");
            }
            switch (type) {
                case "int": ps.setInt(pos, ((Number) v).intValue()); break;
                case "bigint": ps.setLong(pos, ((Number) v).longValue()); break;
                case "smallint": ps.setShort(pos, ((Number) v).shortValue()); break;
                case "tinyint": ps.setByte(pos, (byte) ((Number) v).intValue()); break;
                case "bit": ps.setBoolean(pos, (Boolean) v); break;
                case "decimal": ps.setBigDecimal(pos, new BigDecimal(v.toString())); break;
                case "real": ps.setFloat(pos, Float.parseFloat(v.toString())); break;
                case "float": ps.setDouble(pos, Double.parseDouble(v.toString())); break;
                case "string": ps.setString(pos, (String) v); break;
                case "nstring": ps.setNString(pos, (String) v); break;
                case "bytes": ps.setBytes(pos, unhex((String) v)); break;
                case "date": ps.setDate(pos, java.sql.Date.valueOf((String) v)); break;
                case "time": ps.setTime(pos, java.sql.Time.valueOf((String) v)); break;
                case "timestamp": ps.setTimestamp(pos, java.sql.Timestamp.valueOf((String) v)); break;
                case "datetimeoffset": ps.setObject(pos, OffsetDateTime.parse((String) v)); break;
                case "uuid": ps.setObject(pos, v, -145); break;
                default: throw new IllegalArgumentException("unknown parameter type " + type);
            }
        }
    }

    static byte[] unhex(String s) {
        if (s.startsWith("0x") || s.startsWith("0X")) {
            s = s.substring(2);
        }
        byte[] out = new byte[s.length() / 2];
        for (int k = 0; k < out.length; k++) {
            out[k] = (byte) Integer.parseInt(s.substring(2 * k, 2 * k + 2), 16);
        }
        return out;
    }

    /** Just enough JSON for the script and the output (no external library on the classpath needed). */
    static final class Json {
        private final String s;
        private int p;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String text) {
            Json j = new Json(text);
            Object v = j.value();
            j.ws();
            if (j.p != text.length()) {
                throw new IllegalArgumentException("trailing characters in JSON at " + j.p + ": " + text);
            }
            return v;
        }

        private void ws() {
            while (p < s.length() && Character.isWhitespace(s.charAt(p))) {
                p++;
            }
        }

        private Object value() {
            ws();
            if (p >= s.length()) {
                throw new IllegalArgumentException("unexpected end of JSON: " + s);
            }
            char c = s.charAt(p);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                p++;
                ws();
                if (s.charAt(p) == '}') {
                    p++;
                    return m;
                }
                while (true) {
                    ws();
                    String k = string();
                    ws();
                    expect(':');
                    m.put(k, value());
                    ws();
                    if (s.charAt(p) == ',') {
                        p++;
                        continue;
                    }
                    expect('}');
                    return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                p++;
                ws();
                if (s.charAt(p) == ']') {
                    p++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    ws();
                    if (s.charAt(p) == ',') {
                        p++;
                        continue;
                    }
                    expect(']');
                    return l;
                }
            }
            if (c == '"') {
                return string();
            }
            if (s.startsWith("true", p)) {
                p += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", p)) {
                p += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", p)) {
                p += 4;
                return null;
            }
            int start = p;
            while (p < s.length() && "+-0123456789.eE".indexOf(s.charAt(p)) >= 0) {
                p++;
            }
            String num = s.substring(start, p);
            if (num.isEmpty()) {
                throw new IllegalArgumentException("bad JSON at " + start + ": " + s);
            }
            if (num.contains(".") || num.contains("e") || num.contains("E")) {
                return new BigDecimal(num);
            }
            return Long.parseLong(num);
        }

        private void expect(char c) {
            if (p >= s.length() || s.charAt(p) != c) {
                throw new IllegalArgumentException("expected '" + c + "' at " + p + ": " + s);
            }
            p++;
        }

        private String string() {
            expect('"');
            StringBuilder sb = new StringBuilder();
            while (true) {
                char c = s.charAt(p++);
                if (c == '"') {
                    return sb.toString();
                }
                if (c == '\\') {
                    char e = s.charAt(p++);
                    switch (e) {
                        case 'n': sb.append('\n'); break;
                        case 't': sb.append('\t'); break;
                        case 'r': sb.append('\r'); break;
                        case 'b': sb.append('\b'); break;
                        case 'f': sb.append('\f'); break;
                        case 'u':
                            sb.append((char) Integer.parseInt(s.substring(p, p + 4), 16));
                            p += 4;
                            break;
                        default: sb.append(e);
                    }
                }
                else {
                    sb.append(c);
                }
            }
        }

        static String write(Object o) {
            StringBuilder sb = new StringBuilder();
            write(sb, o);
            return sb.toString();
        }

        @SuppressWarnings("unchecked")
        private static void write(StringBuilder sb, Object o) {
            if (o == null) {
                sb.append("null");
            }
            else if (o instanceof String) {
                quote(sb, (String) o);
            }
            else if (o instanceof Boolean || o instanceof Integer || o instanceof Long || o instanceof Short
                    || o instanceof Byte || o instanceof BigDecimal) {
                sb.append(o);
            }
            else if (o instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<String, Object> e : ((Map<String, Object>) o).entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    quote(sb, e.getKey());
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            }
            else if (o instanceof List) {
                sb.append('[');
                boolean first = true;
                for (Object x : (List<Object>) o) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    write(sb, x);
                }
                sb.append(']');
            }
            else {
                quote(sb, o.toString());
            }
        }

        private static void quote(StringBuilder sb, String v) {
            sb.append('"');
            for (int k = 0; k < v.length(); k++) {
                char c = v.charAt(k);
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        }
                        else {
                            sb.append(c);
                        }
                }
            }
            sb.append('"');
        }
    }
}
