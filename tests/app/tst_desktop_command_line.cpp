// The desktop app's command line: --help and --version answer on stdout and exit 0 without a
// window; an unknown option is refused (exit 2, a message naming it) instead of being added to the
// library as a file; Qt's own options pass; "--" ends the options.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "app/desktop/command_line.h"

using sl::desktop::CommandLine;
using sl::desktop::parse_command_line;

Q_DECLARE_METATYPE(CommandLine::Action)

class TstDesktopCommandLine : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void parses_data();
    void parses();
    void binaryAnswersHelpAndRefusesUnknownOptions_data();
    void binaryAnswersHelpAndRefusesUnknownOptions();
};

void TstDesktopCommandLine::parses_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<CommandLine::Action>("action");
    QTest::addColumn<QStringList>("paths");
    using A = CommandLine::Action;
    QTest::newRow("files") << QStringList{"a.pdf", "dir"} << A::Run << QStringList{"a.pdf", "dir"};
    QTest::newRow("help") << QStringList{"a.pdf", "--help"} << A::Help << QStringList{};
    QTest::newRow("-h") << QStringList{"-h"} << A::Help << QStringList{};
    QTest::newRow("version") << QStringList{"--version"} << A::Version << QStringList{};
    QTest::newRow("unknown") << QStringList{"--frobnicate", "a.pdf"} << A::Error << QStringList{};
    QTest::newRow("unknown short") << QStringList{"-x"} << A::Error << QStringList{};
    QTest::newRow("qt options") << QStringList{"-platform", "offscreen", "-reverse", "--style=fusion", "a.pdf"} << A::Run
                                << QStringList{"a.pdf"};
    QTest::newRow("after --") << QStringList{"--", "--help", "-odd.pdf"} << A::Run << QStringList{"--help", "-odd.pdf"};
    QTest::newRow("stdin-like dash") << QStringList{"-"} << A::Run << QStringList{"-"};
}

void TstDesktopCommandLine::parses() {
    QFETCH(QStringList, args);
    QFETCH(CommandLine::Action, action);
    QFETCH(QStringList, paths);
    std::vector<std::string> argv;
    for (const QString& a : args) argv.push_back(a.toStdString());
    const CommandLine cl = parse_command_line(argv);
    QCOMPARE(cl.action, action);
    QStringList got;
    for (const auto& p : cl.paths) got << QString::fromStdString(p);
    if (action == CommandLine::Action::Run) QCOMPARE(got, paths);
    if (action == CommandLine::Action::Error) QVERIFY(QString::fromStdString(cl.message).contains(args.front()));
}

void TstDesktopCommandLine::binaryAnswersHelpAndRefusesUnknownOptions_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("out");  // in stdout
    QTest::addColumn<QString>("err");  // in stderr
    QTest::newRow("--help") << QStringList{"--help"} << 0 << QStringLiteral("usage: sightline") << QString();
    QTest::newRow("-h") << QStringList{"-h"} << 0 << QStringLiteral("usage: sightline") << QString();
    QTest::newRow("--version") << QStringList{"--version"} << 0 << QStringLiteral("Sightline") << QString();
    QTest::newRow("unknown") << QStringList{"--frobnicate"} << 2 << QString()
                             << QStringLiteral("unknown option '--frobnicate'");
}

void TstDesktopCommandLine::binaryAnswersHelpAndRefusesUnknownOptions() {
    QFETCH(QStringList, args);
    QFETCH(int, exit_code);
    QFETCH(QString, out);
    QFETCH(QString, err);
    QTemporaryDir home;  // were a window to open, its library would be here, not in the user's
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("HOME"), home.path());
    env.insert(QStringLiteral("XDG_DATA_HOME"), home.filePath(QStringLiteral("data")));
    env.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(SIGHTLINE_DESKTOP_PATH), args);
    QVERIFY(p.waitForStarted());
    if (!p.waitForFinished(20000)) {
        p.kill();
        p.waitForFinished();
        QFAIL("sightline did not answer and exit (it opened a window?)");
    }
    const QString stdout_text = QString::fromUtf8(p.readAllStandardOutput());
    const QString stderr_text = QString::fromUtf8(p.readAllStandardError());
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), exit_code);
    if (!out.isEmpty()) QVERIFY2(stdout_text.contains(out), qPrintable(stdout_text));
    if (!err.isEmpty()) QVERIFY2(stderr_text.contains(err), qPrintable(stderr_text));
}

QTEST_GUILESS_MAIN(TstDesktopCommandLine)
#include "tst_desktop_command_line.moc"
