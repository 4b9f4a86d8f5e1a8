package qupath.lib.gui.viewer;

import java.awt.geom.AffineTransform;
import java.awt.geom.NoninvertibleTransformException;
import java.awt.geom.Point2D;
import java.awt.image.BufferedImage;

import javafx.scene.layout.Pane;
import qupath.lib.images.ImageData;
import qupath.lib.images.servers.ImageServer;

/**
 * The viewer geometry of QuPath's QuPathViewer (qupath-gui-fx .../viewer/QuPathViewer.java): a centre in
 * full-resolution pixels, a downsample and a component; the same affine transform and zoom rules.
 */
public class QuPathViewer {
    private final Pane view;
    private ImageData<BufferedImage> imageData;
    private double xCenter;
    private double yCenter;
    private double downsampleFactor = 1.0;
    private final AffineTransform transform = new AffineTransform();
    private AffineTransform transformInverse = new AffineTransform();
    private int repaints;

    public QuPathViewer(double width, double height) {
        this.view = new Pane(width, height);
    }

    public Pane getView() {
        return view;
    }

    public double getWidth() {
        return view.getWidth();
    }

    public double getHeight() {
        return view.getHeight();
    }

    public void repaint() {
        repaints++;
    }

    /** How often the viewer was asked to repaint (fixture only: lets tests see that setters repaint). */
    public int getRepaintCount() {
        return repaints;
    }

    public double getMinDownsample() {
        return 1.0 / 64.0;
    }

    public double getMaxDownsample() {
        if (getServer() == null) {
            return 1;
        }
        return Math.max(getServer().getWidth(), getServer().getHeight()) / 100.0;
    }

    public double getDefaultZoomFactor() {
        return 1.01;
    }

    public ImageData<BufferedImage> getImageData() {
        return imageData;
    }

    public void setImageData(ImageData<BufferedImage> imageData) {
        this.imageData = imageData;
        if (imageData != null) {
            zoomToFit();
        }
        repaint();
    }

    public void resetImageData() {
        setImageData(null);
    }

    public ImageServer<BufferedImage> getServer() {
        return imageData == null ? null : imageData.getServer();
    }

    public double getCenterPixelX() {
        return xCenter;
    }

    public double getCenterPixelY() {
        return yCenter;
    }

    public void setCenterPixelLocation(double x, double y) {
        if ((this.xCenter == x && this.yCenter == y) || Double.isNaN(x + y)) {
            return;
        }
        this.xCenter = x;
        this.yCenter = y;
        updateAffineTransform();
        repaint();
    }

    public double getDownsampleFactor() {
        return downsampleFactor;
    }

    /** One argument: zoom about the mouse; no mouse here, so about the centre. */
    public void setDownsampleFactor(double downsampleFactor) {
        setDownsampleFactor(downsampleFactor, -1, -1);
    }

    public void setDownsampleFactor(double downsampleFactor, double cx, double cy) {
        setDownsampleFactor(downsampleFactor, cx, cy, false);
    }

    public void setDownsampleFactor(double downsampleFactor, double cx, double cy, boolean clipToMinMax) {
        if (clipToMinMax) {
            downsampleFactor = Math.min(Math.max(downsampleFactor, getMinDownsample()), getMaxDownsample());
        } else if (downsampleFactor <= 0 || !Double.isFinite(downsampleFactor)) {
            downsampleFactor = getMinDownsample();
        }
        setDownsampleFactorImpl(downsampleFactor, cx, cy);
    }

    private void setDownsampleFactorImpl(double downsampleFactor, double cx, double cy) {
        double currentDownsample = getDownsampleFactor();
        if (currentDownsample == downsampleFactor) {
            return;
        }
        if (cx < 0) {
            cx = getWidth() / 2.0;
        }
        if (cy < 0) {
            cy = getHeight() / 2.0;
        }
        xCenter += (cx - getWidth() / 2.0) * (currentDownsample - downsampleFactor);
        yCenter += (cy - getHeight() / 2.0) * (currentDownsample - downsampleFactor);
        if (!Double.isFinite(downsampleFactor)) {
            downsampleFactor = 1.0;
        }
        this.downsampleFactor = downsampleFactor;
        updateAffineTransform();
        repaint();
    }

    public void zoomIn(int nSteps) {
        setDownsampleFactor(getDownsampleFactor() * Math.pow(getDefaultZoomFactor(), -nSteps), -1, -1);
    }

    public void zoomOut(int nSteps) {
        zoomIn(-nSteps);
    }

    protected double getZoomToFitDownsampleFactor() {
        if (getServer() == null) {
            return Double.NaN;
        }
        return Math.max(getServer().getWidth() / getWidth(), getServer().getHeight() / getHeight());
    }

    public void zoomToFit() {
        if (getServer() == null) {
            return;
        }
        setDownsampleFactorImpl(getZoomToFitDownsampleFactor(), -1, -1);
        centerImage();
    }

    public void centerImage() {
        ImageServer<BufferedImage> server = getServer();
        if (server == null) {
            return;
        }
        setCenterPixelLocation(0.5 * server.getWidth(), 0.5 * server.getHeight());
    }

    public Point2D componentPointToImagePoint(Point2D point, Point2D pointDest, boolean constrainToBounds) {
        return componentPointToImagePoint(point.getX(), point.getY(), pointDest, constrainToBounds);
    }

    public Point2D componentPointToImagePoint(double x, double y, Point2D pointDest, boolean constrainToBounds) {
        if (pointDest == null) {
            pointDest = new Point2D.Double(x, y);
        } else {
            pointDest.setLocation(x, y);
        }
        transformInverse.transform(pointDest, pointDest);
        ImageServer<BufferedImage> server = getServer();
        if (constrainToBounds && server != null) {
            pointDest.setLocation(
                    Math.min(Math.max(pointDest.getX(), 0), server.getWidth()),
                    Math.min(Math.max(pointDest.getY(), 0), server.getHeight()));
        }
        return pointDest;
    }

    /** Full-resolution image → component transform (centre, downsample; no rotation in the fixture). */
    public AffineTransform getTransform() {
        return new AffineTransform(transform);
    }

    protected void updateAffineTransform() {
        if (getServer() == null) {
            return;
        }
        transform.setToIdentity();
        transform.translate(getWidth() * .5, getHeight() * .5);
        transform.scale(1.0 / downsampleFactor, 1.0 / downsampleFactor);
        transform.translate(-xCenter, -yCenter);
        try {
            transformInverse = transform.createInverse();
        } catch (NoninvertibleTransformException e) {
            transformInverse = new AffineTransform();
        }
    }
}
