package qupath.lib.roi;

import qupath.lib.regions.ImagePlane;
import qupath.lib.roi.interfaces.ROI;

/** One point (QuPath: qupath-core .../roi/PointsROI.java; "Points"). */
public class PointsROI implements ROI {
    private final double x;
    private final double y;
    private final ImagePlane plane;

    PointsROI(double x, double y, ImagePlane plane) {
        this.x = x;
        this.y = y;
        this.plane = plane;
    }

    public String getRoiName() {
        return "Points";
    }

    public ImagePlane getImagePlane() {
        return plane;
    }

    public double getCentroidX() {
        return x;
    }

    public double getCentroidY() {
        return y;
    }

    public double getBoundsX() {
        return x;
    }

    public double getBoundsY() {
        return y;
    }

    public double getBoundsWidth() {
        return 0;
    }

    public double getBoundsHeight() {
        return 0;
    }

    public int getNumPoints() {
        return 1;
    }

    public boolean isPoint() {
        return true;
    }

    public boolean isArea() {
        return false;
    }

    public double getArea() {
        return 0;
    }
}
