package qupath.lib.roi;

import qupath.lib.regions.ImagePlane;
import qupath.lib.roi.interfaces.ROI;

/** An axis-aligned rectangle (QuPath: qupath-core .../roi/RectangleROI.java; "Rectangle"). */
public class RectangleROI implements ROI {
    private final double x;
    private final double y;
    private final double width;
    private final double height;
    private final ImagePlane plane;

    RectangleROI(double x, double y, double width, double height, ImagePlane plane) {
        this.x = x;
        this.y = y;
        this.width = width;
        this.height = height;
        this.plane = plane;
    }

    public String getRoiName() {
        return "Rectangle";
    }

    public ImagePlane getImagePlane() {
        return plane;
    }

    public double getCentroidX() {
        return x + width / 2;
    }

    public double getCentroidY() {
        return y + height / 2;
    }

    public double getBoundsX() {
        return x;
    }

    public double getBoundsY() {
        return y;
    }

    public double getBoundsWidth() {
        return width;
    }

    public double getBoundsHeight() {
        return height;
    }

    public int getNumPoints() {
        return 4;
    }

    public boolean isPoint() {
        return false;
    }

    public boolean isArea() {
        return true;
    }

    public double getArea() {
        return width * height;
    }
}
