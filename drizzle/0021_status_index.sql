SET @punctual_0021 = (SELECT IF(table_type = 'VIEW', 'tasks', 'punctual_tasks') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_tasks');--> statement-breakpoint
SET @punctual_0021_sql = CONCAT('UPDATE `', @punctual_0021, '` SET `finished_at` = NULL WHERE `status` IN (''pending'', ''running'') AND `finished_at` IS NOT NULL');--> statement-breakpoint
PREPARE punctual_0021 FROM @punctual_0021_sql;--> statement-breakpoint
EXECUTE punctual_0021;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0021;--> statement-breakpoint
SET @punctual_0021_sql = IF(EXISTS (SELECT 1 FROM information_schema.STATISTICS WHERE table_schema = DATABASE() AND table_name = @punctual_0021 AND index_name = 'tasks_status_finished_at'), CONCAT('ALTER TABLE `', @punctual_0021, '` DROP INDEX `tasks_status_run_at`, ADD INDEX `tasks_status_run_at` (`status`,`finished_at`,`run_at`,`id`,`priority`), DROP INDEX `tasks_status_finished_at`'), 'DO 0');--> statement-breakpoint
PREPARE punctual_0021 FROM @punctual_0021_sql;--> statement-breakpoint
EXECUTE punctual_0021;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0021;
