package com.ontimehq.ontime;

import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Webhook signatures, for receivers. ontime signs each call with
 * {@code Ontime-Signature: t=<unix seconds>,v2=<hex>[,v2=<hex>…]}, where v2 is
 * HMAC-SHA256(secret, t + "." + target + "." + body) and target is the task's
 * target URL exactly as submitted, which the call also carries in
 * {@code Ontime-Target}. A receiver verifies the raw body, before parsing it:
 *
 * <pre>{@code
 * String target = request.getHeader("Ontime-Target");
 * if (!MY_URLS.contains(target)) reject();          // the signature binds the URL: check it is yours
 * Signatures.verify(request.getHeader("Ontime-Signature"), target, rawBody,
 *         Duration.ofMinutes(5), secret);            // throws Signatures.BadSignature
 * }</pre>
 */
public final class Signatures {
    private Signatures() {}

    /** The default tolerance between the signature's time and now: 5 minutes. */
    public static final Duration DEFAULT_TOLERANCE = Duration.ofMinutes(5);

    /** A signature that does not verify; the message says why. */
    public static final class BadSignature extends Exception {
        BadSignature(String message) {
            super("bad webhook signature: " + message);
        }
    }

    /**
     * Checks an Ontime-Signature header against the raw body and the target
     * the call was sent to, accepting any of secrets (the new and the old
     * one during a rotation), and refusing timestamps further than
     * tolerance from now (replays). Comparisons are constant-time.
     */
    public static void verify(String header, String target, byte[] body, Duration tolerance, String... secrets) throws BadSignature {
        verify(header, target, body, Instant.now(), tolerance, secrets);
    }

    /** {@link #verify(String, String, byte[], Duration, String...)} at the time now. */
    public static void verify(String header, String target, byte[] body, Instant now, Duration tolerance, String... secrets) throws BadSignature {
        if (header == null || header.isEmpty()) {
            throw new BadSignature("no Ontime-Signature header");
        }
        String ts = null;
        List<byte[]> sigs = new ArrayList<>();
        for (String part : header.split(",")) {
            int eq = part.indexOf('=');
            if (eq < 0) {
                continue;
            }
            String k = part.substring(0, eq).strip();
            String v = part.substring(eq + 1).strip();
            if (k.equals("t")) {
                ts = v;
            } else if (k.equals("v2")) {
                try {
                    sigs.add(HexFormat.of().parseHex(v));
                } catch (IllegalArgumentException e) {
                    // not hex: not a signature of ours
                }
            }
        }
        if (ts == null || sigs.isEmpty()) {
            throw new BadSignature("header lacks t= or v2=");
        }
        if (secrets.length == 0) {
            throw new BadSignature("no secret to verify with");
        }
        long sec;
        try {
            sec = Long.parseLong(ts);
        } catch (NumberFormatException e) {
            throw new BadSignature("timestamp " + ts);
        }
        Duration away = Duration.between(Instant.ofEpochSecond(sec), now).abs();
        if (away.compareTo(tolerance) > 0) {
            throw new BadSignature("timestamp is " + away.toSeconds() + "s away from now");
        }
        boolean ok = false;
        for (String secret : secrets) {
            byte[] want = mac(secret, ts, target, body);
            for (byte[] s : sigs) {
                ok |= MessageDigest.isEqual(s, want);
            }
        }
        if (!ok) {
            throw new BadSignature("no v2 signature matches");
        }
    }

    /** Whether {@link #verify} accepts the call. */
    public static boolean isValid(String header, String target, byte[] body, Duration tolerance, String... secrets) {
        try {
            verify(header, target, body, tolerance, secrets);
            return true;
        } catch (BadSignature e) {
            return false;
        }
    }

    /** The header ontime would send for body to target at time t: for receivers' own tests. */
    public static String sign(Instant t, String target, byte[] body, String... secrets) {
        String ts = Long.toString(t.getEpochSecond());
        StringBuilder b = new StringBuilder("t=").append(ts);
        for (String s : secrets) {
            b.append(",v2=").append(HexFormat.of().formatHex(mac(s, ts, target, body)));
        }
        return b.toString();
    }

    private static byte[] mac(String secret, String ts, String target, byte[] body) {
        try {
            Mac m = Mac.getInstance("HmacSHA256");
            m.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            m.update((ts + "." + target + ".").getBytes(StandardCharsets.UTF_8));
            return m.doFinal(body);
        } catch (NoSuchAlgorithmException | InvalidKeyException e) {
            // Every JDK has HmacSHA256, and any key length is valid for it.
            throw new IllegalStateException(e);
        }
    }
}
