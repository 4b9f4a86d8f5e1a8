package qupath.fx.utils;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/** qupath-fxtras' FXUtils.callOnApplicationThread, with one thread standing in for JavaFX's. */
public final class FXUtils {
    private static final String FX_THREAD = "JavaFX Application Thread";
    private static final ExecutorService FX = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, FX_THREAD);
        t.setDaemon(true);
        return t;
    });

    private FXUtils() {
    }

    public static boolean isFxApplicationThread() {
        return FX_THREAD.equals(Thread.currentThread().getName());
    }

    /** Runs the callable on the application thread and returns its result; null when it throws (logged). */
    public static <T> T callOnApplicationThread(final Callable<T> callable) {
        if (isFxApplicationThread()) {
            try {
                return callable.call();
            } catch (Exception e) {
                System.err.println("Error calling directly on Platform thread: " + e);
                return null;
            }
        }
        Future<T> result = FX.submit(callable);
        try {
            return result.get();
        } catch (InterruptedException | ExecutionException e) {
            System.err.println("Error calling on Platform thread: " + e);
            return null;
        }
    }
}
