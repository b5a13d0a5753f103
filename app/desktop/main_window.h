// The Sightline main window. Lives on the GUI thread; every method runs there.
#pragma once

#include <QMainWindow>

namespace sl::desktop {

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(QWidget* parent = nullptr);

private:
    void createMenus();
    void showAbout();
};

}  // namespace sl::desktop
