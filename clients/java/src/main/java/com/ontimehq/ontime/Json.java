package com.ontimehq.ontime;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The client's JSON codec: enough JSON for ontime's API, with no dependency.
 *
 * <p>{@link #parse} reads a document into plain Java values: objects into
 * {@code LinkedHashMap<String, Object>} (members in document order), arrays
 * into {@code ArrayList<Object>}, strings, {@code Long} for integers that fit
 * (else {@code BigInteger}), {@code Double} for other numbers (else
 * {@code BigDecimal}), {@code Boolean} and {@code null}. {@link #write} writes
 * those values back, and also any {@code Map}, {@code Iterable}, array of
 * objects, {@code Number}, {@code CharSequence} and {@link Raw} (JSON text
 * written as it is, after checking it parses).
 */
public final class Json {
    private Json() {}

    /** JSON text to be written as it is: a payload a program already holds encoded. */
    public static final class Raw {
        private final String text;

        private Raw(String text) {
            this.text = text;
        }

        /** The JSON text. */
        public String text() {
            return text;
        }

        @Override
        public String toString() {
            return text;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Raw r && r.text.equals(text);
        }

        @Override
        public int hashCode() {
            return text.hashCode();
        }
    }

    /**
     * Wraps JSON text to be sent as it is (a task's payload, say).
     *
     * @throws IllegalArgumentException when the text is not one JSON value
     */
    public static Raw raw(String json) {
        parse(json); // refuse what the node would refuse, before sending
        return new Raw(json.strip());
    }

    /** Thrown when a text is not JSON; the message says where. */
    public static final class ParseException extends IllegalArgumentException {
        ParseException(String message) {
            super(message);
        }
    }

    /** Parses one JSON value (and nothing after it but white space). */
    public static Object parse(String s) {
        Parser p = new Parser(s);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.i != s.length()) {
            throw p.fail("text after the JSON value");
        }
        return v;
    }

    /** Writes v as JSON. */
    public static String write(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v);
        return b.toString();
    }

    /** Appends v as JSON to b. */
    public static void write(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Raw r) {
            b.append(r.text);
        } else if (v instanceof CharSequence s) {
            quote(b, s);
        } else if (v instanceof Boolean) {
            b.append(v);
        } else if (v instanceof Double d) {
            number(b, d);
        } else if (v instanceof Float f) {
            number(b, f.doubleValue());
        } else if (v instanceof BigDecimal d) {
            b.append(d.toString());
        } else if (v instanceof Number) {
            b.append(v); // Long, Integer, Short, Byte, BigInteger, atomics
        } else if (v instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                quote(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof Iterable<?> it) {
            b.append('[');
            boolean first = true;
            for (Object o : it) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                write(b, o);
            }
            b.append(']');
        } else if (v instanceof Object[] a) {
            write(b, List.of(a));
        } else if (v instanceof Character c) {
            quote(b, String.valueOf(c));
        } else {
            throw new IllegalArgumentException("JSON: cannot write a " + v.getClass().getName());
        }
    }

    private static void number(StringBuilder b, double d) {
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            throw new IllegalArgumentException("JSON: " + d + " is not a JSON number");
        }
        if (d == Math.rint(d) && Math.abs(d) < 1e15) {
            b.append((long) d);
        } else {
            b.append(d);
        }
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static void quote(StringBuilder b, CharSequence s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append("\\u00").append(HEX[c >> 4 & 0xf]).append(HEX[c & 0xf]);
                    } else if (c == 0x2028 || c == 0x2029) { // as encoding/json: safe inside JavaScript
                        b.append(c == 0x2028 ? "\\u2028" : "\\u2029");
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }

    private static final class Parser {
        // Deeper documents are refused rather than overflowing the stack.
        private static final int MAX_DEPTH = 512;
        private final String s;
        private int i;

        Parser(String s) {
            this.s = s;
        }

        ParseException fail(String what) {
            return new ParseException("JSON: " + what + " at offset " + i);
        }

        void ws() {
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                    return;
                }
                i++;
            }
        }

        Object value(int depth) {
            if (depth > MAX_DEPTH) {
                throw fail("nesting deeper than " + MAX_DEPTH);
            }
            if (i >= s.length()) {
                throw fail("unexpected end");
            }
            char c = s.charAt(i);
            switch (c) {
                case '{':
                    return object(depth);
                case '[':
                    return array(depth);
                case '"':
                    return string();
                case 't':
                    return literal("true", Boolean.TRUE);
                case 'f':
                    return literal("false", Boolean.FALSE);
                case 'n':
                    return literal("null", null);
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) {
                        return number();
                    }
                    throw fail("unexpected '" + c + "'");
            }
        }

        Object literal(String word, Object v) {
            if (!s.startsWith(word, i)) {
                throw fail("unexpected token");
            }
            i += word.length();
            return v;
        }

        Map<String, Object> object(int depth) {
            Map<String, Object> m = new LinkedHashMap<>();
            i++;
            ws();
            if (i < s.length() && s.charAt(i) == '}') {
                i++;
                return m;
            }
            while (true) {
                ws();
                if (i >= s.length() || s.charAt(i) != '"') {
                    throw fail("expected a member name");
                }
                String k = string();
                ws();
                expect(':');
                ws();
                m.put(k, value(depth + 1));
                ws();
                if (i < s.length() && s.charAt(i) == ',') {
                    i++;
                    continue;
                }
                expect('}');
                return m;
            }
        }

        List<Object> array(int depth) {
            List<Object> a = new ArrayList<>();
            i++;
            ws();
            if (i < s.length() && s.charAt(i) == ']') {
                i++;
                return a;
            }
            while (true) {
                ws();
                a.add(value(depth + 1));
                ws();
                if (i < s.length() && s.charAt(i) == ',') {
                    i++;
                    continue;
                }
                expect(']');
                return a;
            }
        }

        void expect(char c) {
            if (i >= s.length() || s.charAt(i) != c) {
                throw fail("expected '" + c + "'");
            }
            i++;
        }

        String string() {
            i++; // the quote
            StringBuilder b = null;
            int start = i;
            while (true) {
                if (i >= s.length()) {
                    throw fail("unterminated string");
                }
                char c = s.charAt(i);
                if (c == '"') {
                    String out = b == null ? s.substring(start, i) : b.append(s, start, i).toString();
                    i++;
                    return out;
                }
                if (c < 0x20) {
                    throw fail("control character in a string");
                }
                if (c != '\\') {
                    i++;
                    continue;
                }
                if (b == null) {
                    b = new StringBuilder();
                }
                b.append(s, start, i);
                if (i + 1 >= s.length()) {
                    throw fail("unterminated escape");
                }
                char e = s.charAt(i + 1);
                i += 2;
                switch (e) {
                    case '"' -> b.append('"');
                    case '\\' -> b.append('\\');
                    case '/' -> b.append('/');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'n' -> b.append('\n');
                    case 'r' -> b.append('\r');
                    case 't' -> b.append('\t');
                    case 'u' -> {
                        if (i + 4 > s.length()) {
                            throw fail("short \\u escape");
                        }
                        try {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        } catch (NumberFormatException x) {
                            throw fail("bad \\u escape");
                        }
                        i += 4;
                    }
                    default -> throw fail("bad escape \\" + e);
                }
                start = i;
            }
        }

        Object number() {
            int start = i;
            if (s.charAt(i) == '-') {
                i++;
            }
            int digits = i;
            while (i < s.length() && Character.isDigit(s.charAt(i))) {
                i++;
            }
            if (i == digits || (s.charAt(digits) == '0' && i - digits > 1)) {
                throw fail("bad number");
            }
            boolean integer = true;
            if (i < s.length() && s.charAt(i) == '.') {
                integer = false;
                i++;
                int f = i;
                while (i < s.length() && Character.isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == f) {
                    throw fail("bad number");
                }
            }
            if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
                integer = false;
                i++;
                if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
                    i++;
                }
                int e = i;
                while (i < s.length() && Character.isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == e) {
                    throw fail("bad number");
                }
            }
            String t = s.substring(start, i);
            if (integer) {
                if (t.length() < 19) {
                    return Long.parseLong(t);
                }
                BigInteger n = new BigInteger(t);
                return n.bitLength() < 64 ? (Object) n.longValue() : n;
            }
            double d = Double.parseDouble(t);
            return Double.isInfinite(d) ? new BigDecimal(t) : d;
        }
    }

    // Helpers for reading parsed objects.

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Object v) {
        return v instanceof Map<?, ?> ? (Map<String, Object>) v : Map.of();
    }

    @SuppressWarnings("unchecked")
    static List<Object> arr(Object v) {
        return v instanceof List<?> ? (List<Object>) v : List.of();
    }

    static String str(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v instanceof String s ? s : "";
    }

    static long num(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v instanceof Number n ? n.longValue() : 0;
    }

    static boolean bool(Map<String, Object> m, String k) {
        return Boolean.TRUE.equals(m.get(k));
    }
}
