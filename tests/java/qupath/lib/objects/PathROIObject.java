package qupath.lib.objects;

import qupath.lib.objects.classes.PathClass;
import qupath.lib.roi.interfaces.ROI;

/** An object with a ROI and a classification (QuPath: qupath-core .../objects/PathROIObject.java). */
public abstract class PathROIObject extends PathObject {
    private final ROI roi;
    private PathClass pathClass;
    private boolean locked;

    PathROIObject(ROI roi, PathClass pathClass) {
        this.roi = roi;
        this.pathClass = pathClass;
    }

    @Override
    public void setLocked(final boolean locked) {
        this.locked = locked;
    }

    @Override
    public boolean isLocked() {
        return locked;
    }

    @Override
    public PathClass getPathClass() {
        return pathClass;
    }

    @Override
    public void setPathClass(PathClass pathClass) {
        this.pathClass = pathClass;
    }

    @Override
    public ROI getROI() {
        return roi;
    }
}
