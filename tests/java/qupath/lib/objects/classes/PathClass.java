package qupath.lib.objects.classes;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** A classification, one instance per name (QuPath: qupath-core .../objects/classes/PathClass.java). */
public final class PathClass {
    private static final Map<String, PathClass> INSTANCES = new ConcurrentHashMap<>();

    private final String name;
    private Integer color;

    private PathClass(String name, Integer color) {
        this.name = name;
        this.color = color;
    }

    /** The class of that name (made with the given colour when new; an existing class keeps its colour). */
    public static PathClass fromString(String string, Integer color) {
        if (string == null) {
            throw new IllegalArgumentException("fixture: the null class is not modelled");
        }
        return INSTANCES.computeIfAbsent(string.strip(), n -> new PathClass(n, color));
    }

    public static PathClass fromString(String string) {
        return fromString(string, null);
    }

    public String getName() {
        return name;
    }

    public Integer getColor() {
        return color;
    }

    public void setColor(Integer rgb) {
        this.color = rgb;
    }

    @Override
    public String toString() {
        return name;
    }
}
