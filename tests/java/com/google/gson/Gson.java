package com.google.gson;

import java.util.Collection;
import java.util.Locale;

import qupath.lib.common.ColorTools;
import qupath.lib.objects.PathObject;
import qupath.lib.objects.classes.PathClass;
import qupath.lib.roi.interfaces.ROI;

/**
 * Gson as QuPath's GsonTools configures it, for path objects only: the GeoJSON Feature that QuPath's
 * PathObjectTypeAdapter writes (qupath-core .../io/QuPathTypeAdapters.java: "type": "Feature", "id", "geometry",
 * "properties" with "objectType", "name", "color", "classification" via GsonTools.PathClassTypeAdapter as
 * {"name", "color": [r, g, b]}, "isLocked" only when locked; geometries as ROITypeAdapters writes them).
 */
public final class Gson {
    public String toJson(Object value) {
        if (value instanceof PathObject o) {
            return feature(o);
        }
        if (value instanceof Collection<?> c) {
            StringBuilder sb = new StringBuilder("[");
            for (Object item : c) {
                sb.append(sb.length() > 1 ? "," : "").append(toJson(item));
            }
            return sb.append("]").toString();
        }
        throw new IllegalArgumentException("fixture Gson serialises path objects only");
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static String rgb(int c) {
        return String.format(Locale.ROOT, "[%d, %d, %d]", ColorTools.red(c), ColorTools.green(c), ColorTools.blue(c));
    }

    private static String geometry(ROI roi) {
        if (roi.isPoint()) {
            return String.format(Locale.ROOT, "{\"type\":\"MultiPoint\",\"coordinates\":[[%s,%s]]}",
                    num(roi.getCentroidX()), num(roi.getCentroidY()));
        }
        double x = roi.getBoundsX(), y = roi.getBoundsY(), w = roi.getBoundsWidth(), h = roi.getBoundsHeight();
        return String.format(Locale.ROOT, "{\"type\":\"Polygon\",\"coordinates\":[[[%s,%s],[%s,%s],[%s,%s],[%s,%s],[%s,%s]]]}",
                num(x), num(y), num(x + w), num(y), num(x + w), num(y + h), num(x), num(y + h), num(x), num(y));
    }

    private static String num(double v) {
        return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
    }

    private static String feature(PathObject o) {
        StringBuilder p = new StringBuilder();
        p.append("\"objectType\":").append(quote(o.isAnnotation() ? "annotation" : "detection"));
        if (o.getName() != null) {
            p.append(",\"name\":").append(quote(o.getName()));
        }
        if (o.getColor() != null) {
            p.append(",\"color\":").append(rgb(o.getColor()));
        }
        PathClass pc = o.getPathClass();
        if (pc != null) {
            p.append(",\"classification\":{\"name\":").append(quote(pc.getName()));
            if (pc.getColor() != null) {
                p.append(",\"color\":").append(rgb(pc.getColor()));
            }
            p.append("}");
        }
        if (o.isLocked()) {
            p.append(",\"isLocked\":true");
        }
        return "{\"type\":\"Feature\",\"id\":" + quote(o.getID().toString()) + ",\"geometry\":" + geometry(o.getROI())
                + ",\"properties\":{" + p + "}}";
    }
}
