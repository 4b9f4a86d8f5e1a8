package javafx.scene.layout;

/** The viewer component's size, as JavaFX's Pane reports it (getWidth/getHeight in pixels). */
public class Pane {
    private final double width;
    private final double height;

    public Pane(double width, double height) {
        this.width = width;
        this.height = height;
    }

    public double getWidth() {
        return width;
    }

    public double getHeight() {
        return height;
    }
}
