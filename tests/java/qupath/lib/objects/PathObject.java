package qupath.lib.objects;

import java.util.UUID;

import qupath.lib.objects.classes.PathClass;
import qupath.lib.roi.interfaces.ROI;

/** An object of the hierarchy (QuPath: qupath-core .../objects/PathObject.java; the members the bridge uses). */
public abstract class PathObject {
    private final UUID id = UUID.randomUUID();
    private String name;
    private Integer color;

    public UUID getID() {
        return id;
    }

    public String getName() {
        return name;
    }

    public void setName(String name) {
        this.name = name;
    }

    public Integer getColor() {
        return color;
    }

    public void setColor(Integer color) {
        this.color = color;
    }

    public abstract boolean isLocked();

    public abstract void setLocked(boolean locked);

    public abstract PathClass getPathClass();

    public abstract void setPathClass(PathClass pathClass);

    public abstract ROI getROI();

    public boolean hasROI() {
        return getROI() != null;
    }

    public boolean isAnnotation() {
        return false;
    }
}
