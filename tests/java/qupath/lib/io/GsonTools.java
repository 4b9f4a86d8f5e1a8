package qupath.lib.io;

import com.google.gson.Gson;

/** QuPath's Gson with its type adapters (QuPath: qupath-core .../io/GsonTools.java). */
public final class GsonTools {
    private static final Gson GSON = new Gson();

    private GsonTools() {
    }

    public static Gson getInstance() {
        return GSON;
    }

    public static Gson getInstance(boolean pretty) {
        return GSON;
    }
}
